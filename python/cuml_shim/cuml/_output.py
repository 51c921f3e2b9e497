"""cuML's output types on gsb: which array type results and fitted attributes come back as.

The rule is cuML's (cuml.internals.base.Base._get_output_type): the global setting
(cuml.set_global_output_type, cuml.using_output_type) when it names a type, else the
estimator's output_type parameter; "input" (the default) mirrors the input of the call,
and fitted attributes mirror the input of fit.

gsb's results live in host memory, so the types cuML maps by memory ('array',
'dataframe', 'series', 'df_obj') give their host forms (numpy, pandas), as cuML does for
host data; 'cudf' needs the cudf package; 'cupy' and 'numba' (device arrays) wait for
gsb's GPU-arrays support and are refused with a NotImplementedError saying so.
"""
import contextlib
import threading

import numpy as np

OUTPUT_TYPES = ("input", "numpy", "cupy", "cudf", "pandas", "numba", "array", "dataframe",
                "series", "df_obj")
_HOST_FORM = {"array": "numpy", "dataframe": "pandas", "series": "pandas",
              "df_obj": "pandas"}
_DEVICE_ONLY = ("cupy", "numba")

_global = {"output_type": None}
_state = threading.local()  # depth of gsb-estimator calls on this thread


def check_output_type(output_type):
    """output_type lower-cased, after cuML's validation and gsb's limits."""
    if output_type is None:
        return None
    if not isinstance(output_type, str) or output_type.lower() not in OUTPUT_TYPES:
        valid = ", ".join(map(repr, OUTPUT_TYPES))
        raise ValueError(f"`output_type` must be one of {valid} or None. Got: "
                         f"{output_type!r}")
    output_type = output_type.lower()
    if output_type in _DEVICE_ONLY:
        raise NotImplementedError(
            f"output_type={output_type!r} needs the GPU-arrays support, which gsb does not "
            f"have yet: gsb returns host arrays. Use 'numpy', 'pandas' or 'input' (the "
            f"default).")
    if output_type == "cudf":
        _cudf()
    return output_type


def _cudf():
    try:
        import cudf
    except ImportError:
        raise ImportError(
            "output_type='cudf' needs the cudf package (RAPIDS), which is not installed. "
            "gsb's results are host arrays: use 'pandas' (or 'dataframe') for DataFrames "
            "and Series.") from None
    return cudf


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


# ---- the API boundary: only what reaches the user is converted ----------------------------

@contextlib.contextmanager
def api_call():
    """Mark a call of an estimator method; yields True for the outermost one (the call
    the user made), whose result is converted.  Inner calls (score calling predict,
    fit_transform calling fit) and gsb's own reads of fitted attributes see numpy."""
    depth = getattr(_state, "depth", 0)
    _state.depth = depth + 1
    try:
        yield depth == 0
    finally:
        _state.depth = depth


def internal():
    return getattr(_state, "depth", 0) > 0


def input_kind(obj):
    """cuML's determine_array_type for what gsb takes: the output type that mirrors obj."""
    if isinstance(obj, np.ndarray):
        return "numpy"
    top = type(obj).__module__.split(".")[0]
    if top in ("pandas", "cudf"):
        return top
    return "numpy"  # lists, tuples, data handles, polars ...


def resolve(output_type, mirror):
    """The concrete type of a result: the global setting, else the estimator's
    output_type; 'input' takes mirror (a kind from input_kind)."""
    out = _global["output_type"]
    if out in (None, "input"):
        out = check_output_type(output_type) or "input"
    if out == "input":
        out = mirror or "numpy"
    return _HOST_FORM.get(out, out)


def convert(value, kind, index=None):
    """value (an array, or a tuple of them) as kind; anything else as it is."""
    if isinstance(value, tuple):
        return tuple(convert(v, kind, index) for v in value)
    if not isinstance(value, np.ndarray) or kind == "numpy" or value.ndim not in (1, 2):
        return value
    import pandas as pd
    if index is not None and len(index) != len(value):
        index = None
    out = pd.Series(value, index=index) if value.ndim == 1 else \
        pd.DataFrame(value, index=index)
    return _cudf().from_pandas(out) if kind == "cudf" else out
