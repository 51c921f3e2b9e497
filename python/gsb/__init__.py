"""gsb: scikit-learn-style machine learning on the gsb engine (CPU or GPU).

    from gsb.cluster import KMeans
    KMeans(n_clusters=3).fit(X).labels_

The engine runs in this process by default; gsb.set_config(device=...) picks
its device.  gsb.connect(url) (or $GSB_URL) sends the work to a gsbd server
instead ("tcp://127.0.0.1:19876", "unix:///path/gsbd.sock"); gsb.server
starts one.  gsb.put(X) uploads data once for many calls; gsb.empty(shape)
makes arrays that reach the engine (or a local gsbd) with no copy.
"""
from . import _lib
from ._data import DataHandle, empty, put, zeros
from ._session import (GsbAuthError, GsbConnectionError, connect, get_config, session_info,
                       set_config)
from ._store import delete_saved, list_saved, load

__version__ = _lib.version()


def info():
    """The engine's self-description: version, backends, estimators and their parameters
    (of the library in this process; gsb.session_info() describes the session in use,
    embedded or a server)."""
    return _lib.info()


from . import (cluster, decomposition, ensemble, linear_model, manifold,  # noqa: E402
               neighbors, preprocessing, svm)


def __getattr__(name):
    # gsb.server on first use, not at import: `python -m gsb.server` then runs it once
    if name == "server":
        import importlib
        return importlib.import_module(".server", __name__)
    raise AttributeError(f"module 'gsb' has no attribute {name!r}")

__all__ = ["cluster", "decomposition", "ensemble", "linear_model", "manifold", "neighbors",
           "preprocessing", "svm", "server", "set_config", "get_config", "connect", "info",
           "session_info", "put", "empty", "zeros", "DataHandle", "GsbConnectionError",
           "GsbAuthError", "load", "list_saved", "delete_saved", "__version__"]
