"""Arrays in GPU memory (CuPy, PyTorch, Numba, JAX, anything with __dlpack__ or
__cuda_array_interface__) handed to the engine where they are.

A CUDA array becomes a DeviceArray: the engine's reference to the memory (gsb.h's
gsb_device_array), which an embedded session on that GPU reads in place (no host copy;
the NaN check runs on the GPU).  Objects with __dlpack__ go through DLPack (the device
ordinal is known; the producer's pending work is ordered before the engine's through the
legacy default stream, as the protocol's stream argument asks); objects with only the
CUDA array interface (Numba) pass its pointer, strides and stream.  A session without a
GPU (device=cpu) or a remote one gets a host copy made by the array's own library (one
device-to-host copy; docs/REMOTE.md).  CPU DLPack objects (PyTorch CPU tensors, numpy's
own) become numpy views with no copy (np.from_dlpack).

Nothing here imports CuPy, PyTorch, Numba or JAX: types are told by their attributes and
module names, and a library is imported only to copy an array of its own.
"""
import ctypes

import numpy as np

from . import _lib

_KDL_CPU, _KDL_CUDA, _KDL_CUDA_HOST, _KDL_CUDA_MANAGED = 1, 2, 3, 13
_ENGINE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32),
                  np.dtype(np.int64))


def _top_module(obj):
    return type(obj).__module__.split(".")[0]


def _detached(obj):
    """A PyTorch tensor that needs grad, detached (its memory, no copy): neither
    protocol exports those."""
    if _top_module(obj) == "torch" and getattr(obj, "requires_grad", False):
        return obj.detach()
    return obj


def dlpack_device(obj):
    """(device_type, id) from __dlpack_device__, or None."""
    fn = getattr(obj, "__dlpack_device__", None)
    if fn is None or not callable(getattr(obj, "__dlpack__", None)):
        return None
    try:
        dev = fn()
        return int(dev[0]), int(dev[1])
    except Exception:  # noqa: BLE001 - a producer that cannot say: not one of ours
        return None


def is_device_array(obj):
    """True for arrays in CUDA memory (a cheap test: attributes only)."""
    if isinstance(obj, (np.ndarray, DeviceArray)):
        return isinstance(obj, DeviceArray)
    dev = dlpack_device(obj)
    if dev is not None:
        return dev[0] in (_KDL_CUDA, _KDL_CUDA_MANAGED)
    return hasattr(obj, "__cuda_array_interface__")


def host_dlpack(obj):
    """A numpy view of a CPU DLPack object (PyTorch CPU tensors ...), or None."""
    if isinstance(obj, np.ndarray):
        return None
    dev = dlpack_device(obj)
    if dev is None or dev[0] not in (_KDL_CPU, _KDL_CUDA_HOST):
        return None
    try:
        return np.from_dlpack(_detached(obj))
    except (TypeError, BufferError, RuntimeError):
        return None  # a dtype numpy's DLPack does not take (bfloat16 ...): the slow path


# ---- host copies, by the array's own library ------------------------------------------

def to_host(obj):
    """A numpy copy of a device array (one device-to-host copy)."""
    if isinstance(obj, DeviceArray):
        obj = obj.obj
    obj = _detached(obj)
    top = _top_module(obj)
    if top == "cupy":
        return obj.get()
    if top == "torch":
        return obj.cpu().numpy()
    if hasattr(obj, "copy_to_host"):  # Numba device arrays
        return obj.copy_to_host()
    if top in ("jax", "jaxlib"):
        return np.asarray(obj)
    raise TypeError(
        f"gsb: cannot copy a {type(obj).__module__}.{type(obj).__name__} in GPU memory to the "
        f"host for this session (it has no GPU, or is remote): copy it to a numpy array "
        f"first")


# ---- the engine's reference -------------------------------------------------------------

class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

_DL_CODES = {(2, 32): np.float32, (2, 64): np.float64, (0, 32): np.int32, (0, 64): np.int64,
             (2, 16): np.float16, (0, 8): np.int8, (0, 16): np.int16, (1, 8): np.uint8,
             (1, 16): np.uint16, (1, 32): np.uint32, (1, 64): np.uint64, (6, 8): np.bool_}


def _cai_stream(cai):
    """The producer's stream from the CUDA array interface (v3): None means the data is
    ready; a missing key (v2) is taken as the legacy default stream, to be safe."""
    if "stream" not in cai:
        return _lib.STREAM_LEGACY
    stream = cai["stream"]
    return _lib.STREAM_NONE if stream is None else int(stream)


class DeviceArray:
    """An array in GPU memory, described for the engine (shape, numpy dtype, ndim: what
    the estimators check).  obj keeps the memory alive while the engine reads it."""

    def __init__(self, obj):
        self.obj = _detached(obj)
        self._capsule = None
        self._storage = _lib.GsbDeviceArray()
        self._ref = None
        if dlpack_device(self.obj) is not None:
            self._from_dlpack()
        else:
            self._from_cai(self.obj.__cuda_array_interface__)
        self.ndim = len(self.shape)
        self.size = int(np.prod(self.shape)) if self.shape else 1

    def _from_dlpack(self):
        # the producer orders its pending work before the legacy default stream, and
        # the engine orders itself after that stream (gsb.h: GSB_STREAM_LEGACY)
        self._capsule = self.obj.__dlpack__(stream=_lib.STREAM_LEGACY)
        ptr = _capsule_pointer(self._capsule, b"dltensor")
        t = _DLTensor.from_address(ptr)  # DLManagedTensor starts with its DLTensor
        self.shape = tuple(int(t.shape[k]) for k in range(t.ndim))
        self.dtype = np.dtype(_DL_CODES.get((t.code, t.bits), np.void)) if t.lanes == 1 \
            else np.dtype(np.void)
        self._dltensor = ptr
        self._stream = _lib.STREAM_LEGACY

    def _from_cai(self, cai):
        if cai.get("mask") is not None:
            raise ValueError("gsb: masked CUDA arrays are not supported")
        self.shape = tuple(int(n) for n in cai["shape"])
        self.dtype = np.dtype(cai["typestr"])
        self._ptr = int(cai["data"][0])
        self._strides = cai.get("strides")
        self._stream = _cai_stream(cai)
        self._dltensor = None

    def engine_ready(self):
        """The engine takes the dtype (float32/64, int32/64, native byte order) and at
        most 2 dimensions; anything else goes through a host copy and numpy's rules."""
        return self.dtype in _ENGINE_DTYPES and self.ndim <= 2

    def _gsb_ref(self):
        """gsb_array_on_device of the array (the struct lives in self)."""
        if self._ref is not None:
            return _lib.GsbArray.from_buffer_copy(self._ref)
        st = self._storage
        if self._dltensor is not None:
            out = _lib.GsbArray()
            _lib.check(_lib.bridge.gsb_array_from_dlpack(
                self._dltensor, self._stream, ctypes.byref(st), ctypes.byref(out)))
        else:
            st.struct_size = ctypes.sizeof(st)
            st.device_type = _lib.DEVICE_CUDA
            st.device_id = _lib.DEVICE_ID_OF_MEMORY
            st.stream = self._stream
            a = st.array
            a.data = self._ptr if self.size else None
            a.dtype = _lib._NP_TO_GSB[self.dtype]
            a.ndim = self.ndim
            for k in range(self.ndim):
                a.shape[k] = self.shape[k]
                if self._strides is not None:
                    a.strides[k] = int(self._strides[k])
            out = _lib.bridge.gsb_array_on_device(ctypes.byref(st))
        self._ref = out
        return _lib.GsbArray.from_buffer_copy(out)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self):
        return (f"<gsb.DeviceArray of a {type(self.obj).__module__}.{type(self.obj).__name__} "
                f"shape={self.shape} dtype={self.dtype}>")

    def __array__(self, dtype=None, copy=None):
        raise TypeError("a gsb.DeviceArray is GPU memory: gsb estimators read it in place; "
                        "copy it to the host with its own library")


def for_session(a, session):
    """What a call on session passes for input a: a DeviceArray as it is on an embedded
    session with a GPU, else its host copy (numpy); anything else unchanged."""
    if not isinstance(a, DeviceArray):
        return a
    if session.remote or not session_has_gpu(session):
        return to_host(a.obj)
    return a


def session_has_gpu(session):
    """An embedded session that computes on a GPU (cached on the session)."""
    known = getattr(session, "_gsb_has_gpu", None)
    if known is None:
        info = session.info()
        known = bool(info.get("gpu")) and info.get("device") != "cpu"
        session._gsb_has_gpu = known
    return known
