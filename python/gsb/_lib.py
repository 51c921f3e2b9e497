"""ctypes bindings to libgsb: library loading, the C structs, error mapping.

Nothing here knows about estimators; _estimator.py builds on these calls.
The library is found, in order, at $GSB_LIBRARY, next to this package
(installed wheels), or in the source tree's build/ folder.
"""
import ctypes
import json
import os
import sys

import numpy as np

# status codes (gsb.h)
OK, EINVAL, EPARAM, ENOTFITTED, ENOMEM, ENOTFOUND, EIO, ECORRUPT, ECANCELLED = range(9)
EBACKEND, EUNSUPPORTED, ENUMERIC, EINTERNAL = 9, 10, 11, 12

F32, F64, I32, I64 = 1, 2, 3, 4
_NP_TO_GSB = {np.dtype(np.float32): F32, np.dtype(np.float64): F64,
              np.dtype(np.int32): I32, np.dtype(np.int64): I64}
_GSB_TO_NP = {v: k for k, v in _NP_TO_GSB.items()}


class GsbArray(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int),
                ("shape", ctypes.c_int64 * 2), ("strides", ctypes.c_int64 * 2)]


class GsbDeviceArray(ctypes.Structure):
    """gsb.h's gsb_device_array: an array in GPU memory."""
    _fields_ = [("struct_size", ctypes.c_size_t), ("array", GsbArray),
                ("device_type", ctypes.c_int), ("device_id", ctypes.c_int),
                ("stream", ctypes.c_void_p)]


DEVICE_CUDA, DEVICE_CUDA_MANAGED, DEVICE_ID_OF_MEMORY = 2, 13, -1
STREAM_LEGACY, STREAM_PER_THREAD, STREAM_NONE = 1, 2, ctypes.c_void_p(-1).value


PROGRESS_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p,
                               ctypes.c_int64, ctypes.c_double)


class GsbError(RuntimeError):
    """An error from the engine that has no closer Python equivalent."""

    def __init__(self, message, status):
        super().__init__(message)
        self.status = status


class ModelCorruptError(GsbError, ValueError):
    """A model blob or saved model is damaged, truncated or of a newer format."""


class GsbConnectionError(ConnectionError):
    """gsbd could not be reached, or went away: the URL, the engine's reason, what to do."""


class GsbAuthError(GsbConnectionError, PermissionError):
    """gsbd refused this client's token (or wanted one and got none)."""


def _candidates():
    env = os.environ.get("GSB_LIBRARY")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    names = ["gsb.dll", "libgsb.dll"] if sys.platform == "win32" else \
        ["libgsb.dylib"] if sys.platform == "darwin" else ["libgsb.so"]
    for folder in (here, os.path.join(here, "lib"),
                   os.path.join(here, "..", "..", "build")):
        for name in names:
            yield os.path.join(folder, name)


def _load():
    tried = []
    for path in _candidates():
        if os.path.exists(path):
            return ctypes.CDLL(os.path.abspath(path))
        tried.append(path)
    raise ImportError(
        "gsb: cannot find the libgsb shared library (tried: %s). Build it with `make` in "
        "the source tree, install the package with pip, or set GSB_LIBRARY to its path."
        % ", ".join(tried))


lib = _load()

_c = ctypes
_sigs = {
    "gsb_version": (_c.c_char_p, []),
    "gsb_errmsg": (_c.c_char_p, []),
    "gsb_free": (None, [_c.c_void_p]),
    "gsb_info_json": (_c.c_int, [_c.POINTER(_c.c_void_p)]),
    "gsb_open": (_c.c_int, [_c.c_char_p, _c.POINTER(_c.c_void_p)]),
    "gsb_close": (None, [_c.c_void_p]),
    "gsb_model_create": (_c.c_int, [_c.c_void_p, _c.c_char_p, _c.c_char_p,
                                    _c.POINTER(_c.c_void_p)]),
    "gsb_model_free": (None, [_c.c_void_p]),
    "gsb_model_is_fitted": (_c.c_int, [_c.c_void_p]),
    "gsb_model_estimator": (_c.c_char_p, [_c.c_void_p]),
    "gsb_model_set_meta": (_c.c_int, [_c.c_void_p, _c.c_char_p]),
    "gsb_model_get_meta": (_c.c_int, [_c.c_void_p, _c.POINTER(_c.c_void_p)]),
    "gsb_model_set_params": (_c.c_int, [_c.c_void_p, _c.c_char_p]),
    "gsb_model_get_params": (_c.c_int, [_c.c_void_p, _c.POINTER(_c.c_void_p)]),
    "gsb_model_call": (_c.c_int, [_c.c_void_p, _c.c_char_p, _c.POINTER(_c.POINTER(GsbArray)),
                                  _c.c_int, _c.c_char_p, _c.POINTER(_c.c_void_p)]),
    "gsb_model_get_attr": (_c.c_int, [_c.c_void_p, _c.c_char_p, _c.POINTER(_c.c_void_p)]),
    "gsb_model_list_attrs": (_c.c_int, [_c.c_void_p, _c.POINTER(_c.c_void_p)]),
    "gsb_model_set_progress": (None, [_c.c_void_p, PROGRESS_FN, _c.c_void_p]),
    "gsb_model_cancel": (None, [_c.c_void_p]),
    "gsb_model_export": (_c.c_int, [_c.c_void_p, _c.POINTER(_c.c_void_p),
                                    _c.POINTER(_c.c_size_t)]),
    "gsb_model_import": (_c.c_int, [_c.c_void_p, _c.c_char_p, _c.c_size_t,
                                    _c.POINTER(_c.c_void_p)]),
    "gsb_model_save": (_c.c_int, [_c.c_void_p, _c.c_char_p]),
    "gsb_model_load": (_c.c_int, [_c.c_void_p, _c.c_char_p, _c.POINTER(_c.c_void_p)]),
    "gsb_model_delete": (_c.c_int, [_c.c_void_p, _c.c_char_p]),
    "gsb_model_list": (_c.c_int, [_c.c_void_p, _c.POINTER(_c.c_void_p)]),
    "gsb_result_count": (_c.c_int, [_c.c_void_p]),
    "gsb_result_name": (_c.c_char_p, [_c.c_void_p, _c.c_int]),
    "gsb_result_array": (_c.POINTER(GsbArray), [_c.c_void_p, _c.c_int]),
    "gsb_result_free": (None, [_c.c_void_p]),
}
for _name, (_res, _args) in _sigs.items():
    _fn = getattr(lib, _name)
    _fn.restype = _res
    _fn.argtypes = _args

# The bridge's entry points (sessions' info, data handles, the arena, the server).
# A libgsb older than the bridge lacks them: the rest of the package still works
# and only these calls say what is missing.
_bridge_sigs = {
    "gsb_status_name": (_c.c_char_p, [_c.c_int]),
    "gsb_session_info": (_c.c_int, [_c.c_void_p, _c.POINTER(_c.c_void_p)]),
    "gsb_data_put": (_c.c_int, [_c.c_void_p, _c.POINTER(GsbArray), _c.POINTER(_c.c_void_p)]),
    "gsb_data_array": (GsbArray, [_c.c_void_p]),
    "gsb_data_free": (None, [_c.c_void_p]),
    "gsb_arena_alloc": (_c.c_int, [_c.c_void_p, _c.c_size_t, _c.POINTER(_c.c_void_p)]),
    "gsb_arena_free": (None, [_c.c_void_p, _c.c_void_p]),
    "gsb_server_start": (_c.c_int, [_c.c_char_p, _c.POINTER(_c.c_void_p)]),
    "gsb_server_url": (_c.c_char_p, [_c.c_void_p, _c.c_int]),
    "gsb_server_stop": (None, [_c.c_void_p]),
    "gsb_serve": (_c.c_int, [_c.c_char_p]),
    "gsb_array_on_device": (GsbArray, [_c.POINTER(GsbDeviceArray)]),
    "gsb_array_from_dlpack": (_c.c_int, [_c.c_void_p, _c.c_void_p, _c.POINTER(GsbDeviceArray),
                                         _c.POINTER(GsbArray)]),
}


def _missing(name):
    def call(*args):
        raise NotImplementedError(
            f"gsb: the libgsb in use ({lib._name}) has no {name}(); it predates this gsb "
            f"package. Rebuild or reinstall gsb.")
    return call


class _Bridge:
    """lib's bridge functions, or stand-ins that explain they are missing."""


bridge = _Bridge()
for _name, (_res, _args) in _bridge_sigs.items():
    _fn = getattr(lib, _name, None)
    if _fn is None:
        _fn = _missing(_name)
    else:
        _fn.restype = _res
        _fn.argtypes = _args
    setattr(bridge, _name, _fn)


def _exception_for(status, message):
    from sklearn.exceptions import NotFittedError
    from sklearn.utils._param_validation import InvalidParameterError
    if status == EPARAM:
        return InvalidParameterError(message)
    if status == EINVAL or status == ENUMERIC:
        return ValueError(message)
    if status == ENOTFITTED:
        return NotFittedError(message)
    if status == ENOMEM:
        return MemoryError(message)
    if status == ENOTFOUND:
        return KeyError(message) if "saved model" in message else AttributeError(message)
    if status == EUNSUPPORTED:
        return NotImplementedError(message)
    if status == ECANCELLED:
        return KeyboardInterrupt(message)
    if status == ECORRUPT:
        return ModelCorruptError(message, status)
    if status == EIO:
        # transport failures of a remote session name "gsbd at URL" (src/session/remote.c);
        # ConnectionError is an OSError, so either except clause catches them
        return GsbConnectionError(message) if "gsbd at " in message else OSError(message)
    return GsbError(message, status)


def check(status):
    """Raise the Python exception matching a failing gsb status."""
    if status != OK:
        message = (lib.gsb_errmsg() or b"").decode("utf-8", "replace")
        raise _exception_for(status, message)


def take_string(ptr):
    """Decode a char* the library allocated, then free it."""
    try:
        return ctypes.string_at(ptr.value).decode("utf-8")
    finally:
        lib.gsb_free(ptr)


def info():
    out = ctypes.c_void_p()
    check(lib.gsb_info_json(ctypes.byref(out)))
    return json.loads(take_string(out))


def version():
    return lib.gsb_version().decode()


def as_gsb_array(a):
    """Describe a numpy array (any layout, dtype float32/64 or int32/64) for the engine.
    A data handle (gsb.put) is described by the engine's reference to it."""
    ref = getattr(a, "_gsb_ref", None)
    if ref is not None:
        return ref()
    g = GsbArray()
    g.data = a.ctypes.data if a.size else None
    g.dtype = _NP_TO_GSB[a.dtype]
    g.ndim = a.ndim
    for k in range(a.ndim):
        g.shape[k] = a.shape[k]
        g.strides[k] = a.strides[k]
    if a.ndim == 2 and a.size == 0:
        g.strides[0] = g.strides[1] = 0
    return g


def to_numpy(g):
    """Copy a result array into a new numpy array."""
    dtype = _GSB_TO_NP[g.dtype]
    shape = tuple(g.shape[k] for k in range(g.ndim))
    n = int(np.prod(shape)) if shape else 1
    if n == 0 or not g.data:
        return np.zeros(shape, dtype=dtype)
    buf = (ctypes.c_char * (n * dtype.itemsize)).from_address(g.data)
    arr = np.frombuffer(buf, dtype=dtype, count=n).copy()
    return arr.reshape(shape) if shape else arr[0]


def take_result(ptr):
    """All arrays of a gsb_result as {name: numpy array}, then free it."""
    try:
        out = {}
        for i in range(lib.gsb_result_count(ptr)):
            name = lib.gsb_result_name(ptr, i).decode()
            out[name] = to_numpy(lib.gsb_result_array(ptr, i).contents)
        return out
    finally:
        lib.gsb_result_free(ptr)
