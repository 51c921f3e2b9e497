"""gsb: scikit-learn-style machine learning on the gsb engine (CPU or GPU).

    from gsb.cluster import KMeans
    KMeans(n_clusters=3).fit(X).labels_

The engine runs in this process by default; gsb.set_config(device=...) picks
its device.  gsb.connect(url) (or $GSB_URL) sends the work to a gsbd server
instead ("tcp://127.0.0.1:19876", "unix:///path/gsbd.sock"); gsb.server
starts one.  gsb.put(X) uploads data once for many calls; gsb.empty(shape)
makes arrays that reach the engine (or a local gsbd) with no copy.

`import gsb` loads numpy and the engine library only: the estimator modules
(gsb.cluster, gsb.linear_model ...) and with them scikit-learn load on first
use (PEP 562), so a script that never touches an estimator pays for none.
"""
import importlib

from . import _lib
from ._data import DataHandle, empty, put, zeros
from ._session import (GsbAuthError, GsbConnectionError, connect, get_config, session_info,
                       set_config)
from ._store import delete_saved, list_saved, load

__version__ = _lib.version()

# imported on first attribute access: the estimator modules build their classes from the
# engine's descriptors and import scikit-learn; gsb.server loads on use so that
# `python -m gsb.server` runs it once
_LAZY_MODULES = ("cluster", "decomposition", "ensemble", "linear_model", "manifold",
                 "neighbors", "preprocessing", "svm", "server")


def info():
    """The engine's self-description: version, backends, estimators and their parameters
    (of the library in this process; gsb.session_info() describes the session in use,
    embedded or a server)."""
    return _lib.info()


def __getattr__(name):
    if name in _LAZY_MODULES:
        return importlib.import_module(f".{name}", __name__)  # also sets gsb.<name>
    raise AttributeError(f"module 'gsb' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY_MODULES))


__all__ = ["cluster", "decomposition", "ensemble", "linear_model", "manifold", "neighbors",
           "preprocessing", "svm", "server", "set_config", "get_config", "connect", "info",
           "session_info", "put", "empty", "zeros", "DataHandle", "GsbConnectionError",
           "GsbAuthError", "load", "list_saved", "delete_saved", "__version__"]
