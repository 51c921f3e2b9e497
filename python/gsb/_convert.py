"""Array-likes to the arrays the engine takes: one place for the estimators and for gsb.put.

Lists, pandas and polars objects become numpy views (no copy for float data);
the dtypes the engine reads (float32/64, int32/64) pass unchanged, others are
converted as scikit-learn converts them.  Data handles (gsb.put) pass
through untouched: anything with a _gsb_ref() is the engine's own reference.
Arrays in GPU memory (CuPy, PyTorch, Numba, JAX) become gsb._devarray.DeviceArray,
the engine's reference to the memory (no copy); CPU DLPack objects (PyTorch CPU
tensors) numpy views.  This module imports only gsb's ctypes layer (_lib, through
_devarray), so every other module can import it.
"""
import numpy as np

from . import _devarray

NUMERIC_OK = (np.float32, np.float64, np.int32, np.int64)


def is_engine_ref(data):
    """True for gsb's data handles (gsb.put), which the engine resolves itself."""
    return callable(getattr(data, "_gsb_ref", None))


def as_array(data, name, estimator=None, max_ndim=2):
    """numpy view of an array-like, in a dtype the engine takes.

    estimator (a name or an object) words the errors as scikit-learn's check_array does."""
    if is_engine_ref(data):
        return data
    if _devarray.is_device_array(data):
        dev = _devarray.DeviceArray(data)
        if dev.engine_ready():
            return dev
        data = _devarray.to_host(data)  # another dtype or shape: numpy's rules below
    elif not isinstance(data, np.ndarray):
        view = _devarray.host_dlpack(data)  # PyTorch CPU tensors ...: no copy
        if view is not None:
            data = view
    if hasattr(data, "tocsr") or type(data).__module__.startswith("scipy.sparse"):
        raise TypeError(f"Sparse data was passed for {name}, but dense data is required. Use "
                        f"'.toarray()' to convert to a dense numpy array.")
    if hasattr(data, "to_numpy") and not isinstance(data, np.ndarray):
        data = data.to_numpy()
    arr = np.asarray(data)
    if arr.dtype.kind == "c":
        raise ValueError("Complex data not supported\n{}\n".format(arr))
    if arr.ndim > max_ndim:
        context = "" if estimator is None else f" by {_who(estimator)}"
        raise ValueError(f"Found array with dim {arr.ndim}, while dim <= {max_ndim} is "
                         f"required{context}.")
    if arr.dtype.kind in "OUSV":
        arr = arr.astype(np.float64)  # numpy's own error names the bad value
    if arr.dtype.type not in NUMERIC_OK:
        arr = arr.astype(np.float32 if arr.dtype == np.float16 else np.float64)
    return arr


def _who(estimator):
    """scikit-learn's estimator_name in check_array's messages."""
    return estimator if isinstance(estimator, str) else type(estimator).__name__
