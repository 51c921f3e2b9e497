"""Arrays that cross to the engine cheaply: data handles and arena arrays.

gsb.put(X) uploads X once (to the embedded engine, or to gsbd) and returns a
DataHandle; estimators take it wherever they take X or y, so fitting and
predicting on the same data, or many models on one data set, send it once.

gsb.empty(shape) returns a numpy array whose memory is the session's arena:
on a Unix-socket session, shared memory gsbd maps, so calls read it with no
copy and nothing crosses the socket; on a local session with a GPU, pinned
memory; elsewhere ordinary memory.  Fill it in place (np.copyto, out=,
slicing); it is freed when the last numpy view of it goes away.
"""
import ctypes
import math

import numpy as np

from . import _devarray, _lib
from ._convert import as_array
from ._session import get_session


class DataHandle:
    """An array uploaded to the session with gsb.put: pass it as X or y.

    It knows its shape and dtype (so estimators can check them) but not its
    values: the bytes live in the engine (or in gsbd).  Freed when garbage
    collected, or explicitly with .free()."""

    def __init__(self, data, session=None):
        if isinstance(data, DataHandle):
            raise TypeError("gsb.put: this is already a DataHandle")
        self.session = session or get_session()
        # a device array: copied on the session's GPU, or through the host without one
        arr = _devarray.for_session(as_array(data, "X", estimator="gsb.put"), self.session)
        handle = ctypes.c_void_p()
        g = _lib.as_gsb_array(arr)
        _lib.check(_lib.bridge.gsb_data_put(self.session.handle, ctypes.byref(g),
                                            ctypes.byref(handle)))
        self._handle = handle
        self.shape = tuple(int(n) for n in arr.shape)
        self.dtype = arr.dtype
        self._ref_struct = _lib.bridge.gsb_data_array(handle)

    # numpy-like description, so shape and dtype checks work on a handle
    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d DataHandle")
        return self.shape[0]

    def _gsb_ref(self):
        """The engine's reference to this data, as a gsb_array (never read through)."""
        if not self._handle:
            raise ValueError("this DataHandle was freed")
        return _lib.GsbArray.from_buffer_copy(self._ref_struct)

    def free(self):
        """Release the uploaded data now (also done when the handle is collected)."""
        self.__del__()

    def __repr__(self):
        state = "" if self._handle else ", freed"
        return (f"<gsb.DataHandle shape={self.shape} dtype={self.dtype} on "
                f"{self.session.url}{state}>")

    def __reduce__(self):
        raise TypeError("a gsb.DataHandle names data inside a session and cannot be pickled; "
                        "pickle the array it was made from")

    def __array__(self, dtype=None, copy=None):
        raise TypeError("a gsb.DataHandle holds no values on this side: pass it to gsb "
                        "estimators (fit, predict, transform, score), or keep the array it was "
                        "made from")

    def __del__(self, _free=_lib.bridge.gsb_data_free):
        handle = getattr(self, "_handle", None)
        if handle:
            self._handle = None
            _free(handle)


def put(X, session=None):
    """Upload X (array-like, at most 2-D, float32/float64/int32/int64) to the current
    session once; returns a DataHandle that estimators accept as X or y."""
    return DataHandle(X, session)


class _ArenaBlock:
    """One gsb_arena_alloc block; numpy arrays over it hold it as their base."""

    def __init__(self, session, shape, dtype, order):
        self.session = session  # the block must be freed before its session closes
        self.ptr = None
        dtype = np.dtype(dtype)
        if dtype not in _lib._NP_TO_GSB:
            raise TypeError(f"gsb.empty: dtype must be float32, float64, int32 or int64, "
                            f"got {dtype}")
        if order not in ("C", "F"):
            raise ValueError(f"gsb.empty: order must be 'C' or 'F', got {order!r}")
        shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(n) for n in shape)
        if any(n < 0 for n in shape):
            raise ValueError(f"gsb.empty: negative dimensions are not allowed: {shape}")
        nbytes = math.prod(shape) * dtype.itemsize
        ptr = ctypes.c_void_p()
        _lib.check(_lib.bridge.gsb_arena_alloc(session.handle, max(nbytes, 1),
                                               ctypes.byref(ptr)))
        self.ptr = ptr.value
        self.nbytes = nbytes
        strides = None
        if order == "F" and len(shape) > 1:
            strides, step = [], dtype.itemsize
            for n in shape:
                strides.append(step)
                step *= max(n, 1)
            strides = tuple(strides)
        self.__array_interface__ = {"version": 3, "shape": shape, "typestr": dtype.str,
                                    "data": (self.ptr, False), "strides": strides}

    def __del__(self, _free=_lib.bridge.gsb_arena_free):
        ptr = getattr(self, "ptr", None)
        if ptr:
            self.ptr = None
            _free(self.session.handle, ptr)


def empty(shape, dtype="float32", order="C", session=None):
    """A new, uninitialised numpy array in the session's arena (see the module doc).

    Arrays made this way cross to gsbd over a Unix socket with no copy; pass them
    (or views of them) to estimators or gsb.put like any array."""
    block = _ArenaBlock(session or get_session(), shape, dtype, order)
    return np.asarray(block)


def zeros(shape, dtype="float32", order="C", session=None):
    """gsb.empty, filled with zeros."""
    arr = empty(shape, dtype, order, session)
    arr.fill(0)
    return arr


def asarray(a, dtype=None, session=None):
    """A copy of a in the session's arena (C order), for arrays reused in many calls."""
    a = np.asarray(a, dtype=dtype)
    out = empty(a.shape, a.dtype if dtype is None else dtype, "C", session)
    np.copyto(out, a)
    return out


def arena_block(arr):
    """The arena block arr's memory comes from, or None (numpy base chain)."""
    base = arr
    while base is not None:
        if isinstance(base, _ArenaBlock):
            return base
        base = getattr(base, "base", None)
    return None
