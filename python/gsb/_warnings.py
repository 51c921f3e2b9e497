"""The engine's warnings (gsb_warnings()) raised as Python warnings after a call.

The engine, or a gsbd for a remote session, lists what scikit-learn would have
warned about during a call (a ConvergenceWarning when a solver stops at
max_iter, a FutureWarning for a deprecated parameter, ...) as category names
and scikit-learn's messages; emit() turns each into warnings.warn with the
matching class, attributed to the first caller outside gsb.
"""
import builtins
import ctypes
import json
import sys
import warnings

from . import _lib

_fn = getattr(_lib.lib, "gsb_warnings", None)  # absent from a libgsb older than warnings
if _fn is not None:
    _fn.restype = ctypes.c_char_p
    _fn.argtypes = []


def _category(name):
    import sklearn.exceptions
    cls = getattr(sklearn.exceptions, name, None) or getattr(builtins, name, None)
    return cls if isinstance(cls, type) and issubclass(cls, Warning) else UserWarning


def _stacklevel():
    """The stacklevel of the first frame outside the gsb packages."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] in (
            "gsb", "cuml", "cuml_proxy"):
        frame, level = frame.f_back, level + 1
    return level


def emit():
    """Warn about what the engine reported for this thread's last call."""
    if _fn is None:
        return
    text = _fn()
    if not text or text == b"[]":
        return
    for w in json.loads(text.decode("utf-8", "replace")):
        warnings.warn(w.get("message", ""), _category(w.get("category", "UserWarning")),
                      stacklevel=_stacklevel())
