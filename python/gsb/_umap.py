"""UMAP: what the Python layer adds to the engine's estimator.

- graph_, the fitted fuzzy simplicial set, as a scipy.sparse CSR matrix built
  from the CSR arrays the engine's "graph" method returns (read on first use
  and kept with the fitted attributes);
- y for supervised UMAP as any label type (categorical: numbers are used as
  they are, -1 meaning unlabelled; other labels are encoded first);
- get_feature_names_out ("umap0", "umap1", ...), as umap-learn's.
The engine warns itself (umap-learn's UserWarning when the spectral
initialisation falls back to a random layout).
"""
import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin

from ._convert import as_array, is_engine_ref


class _LazyGraph:
    """graph_: fetched from the engine on first access, then an instance attribute
    (cleared with the other fitted attributes on a new fit)."""

    def __get__(self, est, owner=None):
        if est is None:
            return self
        if est._model() is None or "embedding_" not in est.__dict__:
            raise AttributeError(f"'{type(est).__name__}' object has no attribute 'graph_'")
        import scipy.sparse
        parts = est._call("graph", [])
        n = len(est.__dict__["embedding_"])
        graph = scipy.sparse.csr_matrix((parts["data"], parts["indices"], parts["indptr"]),
                                        shape=(n, n))
        est.__dict__["graph_"] = graph
        return graph


def _categorical(y, estimator):
    """Labels as float64 codes for the engine (numbers as they are: -1 stays unlabelled)."""
    if is_engine_ref(y):
        return y
    if hasattr(y, "to_numpy"):
        y = y.to_numpy()
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    if y.ndim != 1:
        raise ValueError(f"y should be a 1d array, got an array of shape {y.shape} instead.")
    if y.dtype.kind in "iubf":
        return as_array(y.astype(np.float64), "y", estimator)
    return np.unique(y, return_inverse=True)[1].astype(np.float64)


def make_umap(base):
    """Subclass the generated UMAP class (see the module docstring)."""

    class UMAP(ClassNamePrefixFeaturesOutMixin, base):
        __doc__ = base.__doc__
        graph_ = _LazyGraph()

        def _encode_y_for_fit(self, y):
            return _categorical(y, self)

        @property
        def _n_features_out(self):
            return self.embedding_.shape[1]

    UMAP.__module__ = base.__module__
    UMAP.__qualname__ = "UMAP"  # so pickle finds gsb.manifold.UMAP
    return UMAP
