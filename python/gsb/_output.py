"""Output types: the array type of results and fitted attributes.

gsb's results are numpy arrays by default.  gsb.set_config(output_type=...) chooses
another type for every gsb estimator: 'input' mirrors the input of the call (fitted
attributes: the input of fit), so CuPy in gives CuPy out, a PyTorch tensor gives a tensor
on the same device; 'cupy', 'torch', 'numba' name a type; 'pandas' gives DataFrames and
Series; 'numpy' is the default.  The cuml shim applies cuML's rule on top of this module
(cuml._output: 'input' by default, the estimator's output_type parameter).

The engine computes results in host memory: a device type costs one host-to-device copy
of the result (never of X).  Conversions import the target library only when they run,
so `import gsb` imports none of them.

The API boundary: an estimator method wrapped by `boundary` converts its result only when
it is the outermost call (score calling predict, fit_transform calling fit see numpy), and
the descriptors of fitted attributes convert only outside gsb's own code.
"""
import contextlib
import functools
import importlib.util
import inspect
import threading

import numpy as np

from . import _devarray

GSB_TYPES = ("numpy", "input", "cupy", "torch", "numba", "pandas")

# methods whose results are arrays (or tuples of them), converted on the way out
CONVERTED = ("predict", "predict_proba", "predict_log_proba", "decision_function",
             "transform", "inverse_transform", "fit_transform", "fit_predict",
             "score_samples", "kneighbors", "kneighbors_graph", "radius_neighbors",
             "radius_neighbors_graph", "get_covariance", "get_precision")
# methods that fit: they record the input type that fitted attributes mirror
FITS = ("fit", "partial_fit", "fit_transform", "fit_predict")
PASSED_THROUGH = ("score",)  # scalars, but inner calls must see numpy
DEVICE_KINDS = ("cupy", "torch", "numba", "jax")

_config = {"output_type": None}  # None: numpy
_state = threading.local()  # depth of estimator calls on this thread


def check_output_type(value):
    """gsb.set_config's output_type, lower-cased and checked (None: the default); a device
    type whose package is missing is refused here, with what to install."""
    if value is None:
        return None
    if not isinstance(value, str) or value.lower() not in GSB_TYPES:
        raise ValueError(f"gsb: output_type must be one of {GSB_TYPES} or None, got "
                         f"{value!r}")
    value = value.lower()
    if value in DEVICE_KINDS and importlib.util.find_spec(value) is None:
        raise ImportError(f"gsb: output_type={value!r} needs the {value} package, which is "
                          f"not installed (results are numpy arrays by default)")
    return value


def set_output_type(value):
    _config["output_type"] = check_output_type(value)


def get_output_type():
    return _config["output_type"] or "numpy"


# ---- the API boundary --------------------------------------------------------------------

@contextlib.contextmanager
def api_call():
    """Mark a call of an estimator method; yields True for the outermost one (the call
    the user made), whose result is converted."""
    depth = getattr(_state, "depth", 0)
    _state.depth = depth + 1
    try:
        yield depth == 0
    finally:
        _state.depth = depth


def internal():
    return getattr(_state, "depth", 0) > 0


# ---- what an input is --------------------------------------------------------------------

def input_kind(obj):
    """The output type that mirrors obj: ('numpy',), ('pandas',), ('cudf',), or a device
    kind with where it lives: ('cupy', device id), ('torch', 'cuda:0' / 'cpu'),
    ('numba', None), ('jax', device)."""
    if isinstance(obj, _devarray.DeviceArray):
        obj = obj.obj
    if obj is None or isinstance(obj, np.ndarray):
        return ("numpy",)
    top = type(obj).__module__.split(".")[0]
    if top in ("pandas", "cudf"):
        return (top,)
    if top == "cupy":
        return ("cupy", getattr(getattr(obj, "device", None), "id", None))
    if top == "torch" and hasattr(obj, "device"):
        return ("torch", str(obj.device))
    if top in ("jax", "jaxlib"):
        devices = getattr(obj, "devices", None)
        return ("jax", next(iter(devices()), None) if callable(devices) else None)
    if top == "numba" or hasattr(obj, "copy_to_host"):
        return ("numba", None)
    return ("numpy",)  # lists, tuples, data handles, polars, other DLPack producers


# ---- conversions -------------------------------------------------------------------------

def _to_cupy(arr, where):
    import cupy
    if where is None:
        return cupy.asarray(arr)
    with cupy.cuda.Device(where):
        return cupy.asarray(arr)


def _to_torch(arr, where):
    import torch
    t = torch.from_numpy(np.ascontiguousarray(arr))
    return t.to(where) if where and where != "cpu" else t


def _to_numba(arr, where):
    from numba import cuda
    return cuda.to_device(np.ascontiguousarray(arr))


def _to_jax(arr, where):
    import jax
    return jax.device_put(arr, where) if where is not None else jax.numpy.asarray(arr)


_DEVICE = {"cupy": _to_cupy, "torch": _to_torch, "numba": _to_numba, "jax": _to_jax}
_TORCH_DEFAULT = "cuda"


def convert(value, kind, index=None):
    """value (a numpy array, or a tuple of them) as kind (a kind tuple or a type name);
    anything else as it is.  index: a pandas index for 'pandas' / 'cudf' results."""
    if isinstance(value, tuple):
        return tuple(convert(v, kind, index) for v in value)
    name, where = (kind, None) if isinstance(kind, str) else (kind[0], kind[1] if len(kind) > 1
                                                               else None)
    if not isinstance(value, np.ndarray) or name == "numpy":
        return value
    if name in _DEVICE:
        if name == "torch" and where is None:
            where = _TORCH_DEFAULT
        return _DEVICE[name](value, where)
    if value.ndim not in (1, 2):
        return value
    import pandas as pd
    if index is not None and len(index) != len(value):
        index = None
    out = pd.Series(value, index=index) if value.ndim == 1 else \
        pd.DataFrame(value, index=index)
    if name == "cudf":
        import cudf
        return cudf.from_pandas(out)
    return out


def resolve(mirror):
    """gsb's output kind for a result: the configured type; 'input' takes mirror."""
    out = get_output_type()
    if out == "input":
        return mirror or ("numpy",)
    return (out,)


# ---- the hooks make_class installs -------------------------------------------------------

class FittedArray:
    """A fitted attribute (coef_, cluster_centers_ ...) read in the output type; stored,
    as scikit-learn expects, in the instance's __dict__ (check_is_fitted, pickle).
    Subclasses (the cuml shim) override kind_for."""

    def __init__(self, name):
        self.name = name

    def kind_for(self, obj):
        return resolve(obj.__dict__.get("_gsb_input_kind"))

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        try:
            value = obj.__dict__[self.name]
        except KeyError:
            raise AttributeError(f"{type(obj).__name__!r} object has no attribute "
                                 f"{self.name!r}") from None
        if internal() or not isinstance(value, np.ndarray):
            return value
        kind = self.kind_for(obj)
        return value if kind[0] == "numpy" else convert(value, kind)

    def __set__(self, obj, value):
        obj.__dict__[self.name] = value

    def __delete__(self, obj):
        try:
            del obj.__dict__[self.name]
        except KeyError:
            raise AttributeError(self.name) from None


def boundary(fn, fits, converts, first_arg="X"):
    """fn as an API boundary (see the module doc): a fit records the kind of its input for
    the fitted attributes; a converting method returns the configured type."""
    @functools.wraps(fn)
    def method(self, *args, **kwargs):
        X = args[0] if args else kwargs.get(first_arg)
        with api_call() as outermost:
            if outermost and fits:
                self.__dict__["_gsb_input_kind"] = input_kind(X)
            result = fn(self, *args, **kwargs)
        if not outermost or not converts or result is self:
            return result
        mirror = self.__dict__.get("_gsb_input_kind") if X is None else input_kind(X)
        kind = resolve(mirror)
        return result if kind[0] == "numpy" else convert(result, kind, getattr(X, "index",
                                                                              None))
    return method


def install(cls, attributes):
    """Make gsb class cls an API boundary: descriptors for its fitted attributes (and
    classes_) and boundary wrappers around its methods.  Methods under scikit-learn's
    available_if keep their condition.  Set after the class exists: scikit-learn's
    set_output wrapping (done on class creation) stays inside."""
    from sklearn.utils._available_if import _AvailableIfDescriptor, available_if
    for name in set(attributes) | {"classes_"}:
        setattr(cls, name, FittedArray(name))
    for name in CONVERTED + FITS + PASSED_THROUGH:
        raw = inspect.getattr_static(cls, name, None)
        fits, converts = name in FITS, name in CONVERTED
        if isinstance(raw, _AvailableIfDescriptor):
            wrapped = boundary(raw.fn, fits, converts)
        elif callable(raw):
            params = [p for p in inspect.signature(raw).parameters if p != "self"]
            wrapped = boundary(raw, fits, converts, params[0] if params else "X")
        else:
            continue
        # the class's own method now (an inherited one included): named so
        wrapped.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, available_if(raw.check)(wrapped)
                if isinstance(raw, _AvailableIfDescriptor) else wrapped)
