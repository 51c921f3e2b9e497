"""cuML's output types on gsb: which array type results and fitted attributes come back as.

The rule is cuML's (cuml.internals.base.Base._get_output_type): the global setting
(cuml.set_global_output_type, cuml.using_output_type) when it names a type, else the
estimator's output_type parameter; "input" (the default) mirrors the input of the call,
and fitted attributes mirror the input of fit: CuPy in, CuPy out (on the input's device);
a PyTorch tensor gives a tensor on its device; pandas gives pandas.

gsb computes results in host memory, so a device type ('cupy', 'numba', and 'input' for
device inputs) costs one host-to-device copy of the result; X itself is read where it is
(gsb._devarray).  'array' is CuPy for device inputs and numpy for host ones (cuML's
array of the input's memory); 'dataframe', 'series' and 'df_obj' give pandas; 'cudf' needs
the cudf package.  The conversions and the API boundary are gsb's (gsb._output): this
module adds cuML's names and its rule.
"""
import importlib.util

from gsb import _output as _gsb

OUTPUT_TYPES = ("input", "numpy", "cupy", "cudf", "pandas", "numba", "array", "dataframe",
                "series", "df_obj")
_HOST_FORM = {"dataframe": "pandas", "series": "pandas", "df_obj": "pandas"}
_PACKAGES = {"cupy": "cupy", "numba": "numba", "cudf": "cudf"}

_global = {"output_type": None}

api_call = _gsb.api_call
internal = _gsb.internal
input_kind = _gsb.input_kind
convert = _gsb.convert


def check_output_type(output_type):
    """output_type lower-cased, after cuML's validation; a type whose package is missing
    is refused here, at the setting, with what to install."""
    if output_type is None:
        return None
    if not isinstance(output_type, str) or output_type.lower() not in OUTPUT_TYPES:
        valid = ", ".join(map(repr, OUTPUT_TYPES))
        raise ValueError(f"`output_type` must be one of {valid} or None. Got: "
                         f"{output_type!r}")
    output_type = output_type.lower()
    package = _PACKAGES.get(output_type)
    if package and importlib.util.find_spec(package) is None:
        hint = ("gsb's results are host arrays: use 'pandas' (or 'dataframe') for "
                "DataFrames and Series." if package == "cudf" else
                f"install {package} (with CUDA) to get device arrays, or use 'numpy' or "
                f"'input'.")
        raise ImportError(f"output_type={output_type!r} needs the {package} package, which "
                          f"is not installed. {hint}")
    return output_type


def set_global_output_type(output_type):
    """Set the output type of every estimator's results and fitted attributes (None: each
    estimator's own output_type, 'input' by default).  See cuml.using_output_type."""
    _global["output_type"] = check_output_type(output_type)


def get_global_output_type():
    return _global["output_type"]


class using_output_type:
    """Use output_type within a `with` block; returns the previous global setting."""

    def __init__(self, output_type):
        self.output_type = output_type

    def __enter__(self):
        self.previous = _global["output_type"]
        set_global_output_type(self.output_type)
        return self.previous

    def __exit__(self, *exc):
        _global["output_type"] = self.previous
        return False


class _GlobalSettings:
    """cuml.global_settings: its output_type, read and set as cuML code does."""

    @property
    def output_type(self):
        return _global["output_type"]

    @output_type.setter
    def output_type(self, value):
        set_global_output_type(value)


global_settings = _GlobalSettings()


def resolve(output_type, mirror):
    """The concrete kind of a result (gsb._output's kind tuples): the global setting,
    else the estimator's output_type; 'input' takes mirror (input_kind of the input)."""
    out = _global["output_type"]
    if out in (None, "input"):
        out = check_output_type(output_type) or "input"
    mirror = mirror or ("numpy",)
    if out == "input":
        return mirror
    if out == "array":
        return ("cupy", mirror[1] if mirror[0] == "cupy" else None) \
            if mirror[0] in _gsb.DEVICE_KINDS else ("numpy",)
    return (_HOST_FORM.get(out, out),)
