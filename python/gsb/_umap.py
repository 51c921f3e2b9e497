"""UMAP: what the Python layer adds to the engine's estimator.

- graph_, the fitted fuzzy simplicial set, as a scipy.sparse CSR matrix built
  from the CSR arrays the engine's "graph" method returns (read on first use
  and kept with the fitted attributes);
- y for supervised UMAP as any label type (categorical: numbers are used as
  they are, -1 meaning unlabelled; other labels are encoded first);
- umap-learn's warning when the spectral initialisation fell back to a random
  layout.
"""
import warnings

import numpy as np

from ._estimator import _as_array, _feature_names

_SPECTRAL_WARNING = (
    "Spectral initialisation failed! The eigenvector solver\n"
    "failed. This is likely due to too small an eigengap. Consider\n"
    "adding some noise or jitter to your data.\n\n"
    "Falling back to random initialisation!")


class _LazyGraph:
    """graph_: fetched from the engine on first access, then an instance attribute
    (cleared with the other fitted attributes on a new fit)."""

    def __get__(self, est, owner=None):
        if est is None:
            return self
        if est._model() is None or not hasattr(est, "embedding_"):
            raise AttributeError(f"'{type(est).__name__}' object has no attribute 'graph_'")
        import scipy.sparse
        parts = est._call("graph", [])
        n = est.embedding_.shape[0]
        graph = scipy.sparse.csr_matrix((parts["data"], parts["indices"], parts["indptr"]),
                                        shape=(n, n))
        est.__dict__["graph_"] = graph
        return graph


def _labels(y):
    """Categorical targets as float64 codes for the engine (-1 stays unlabelled)."""
    if hasattr(y, "to_numpy"):
        y = y.to_numpy()
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    if y.ndim != 1:
        raise ValueError(f"y should be a 1d array, got an array of shape {y.shape} instead.")
    if y.dtype.kind in "iubf":
        return y.astype(np.float64)
    classes, codes = np.unique(y, return_inverse=True)
    return codes.astype(np.float64)


def make_umap(base):
    """Subclass the generated UMAP class (see the module docstring)."""

    class UMAP(base):
        __doc__ = base.__doc__
        graph_ = _LazyGraph()

        def fit(self, X, y=None, **fit_params):
            """Fit X into an embedded space (y: optional labels for supervised UMAP)."""
            self._fit_umap("fit", X, y, fit_params)
            return self

        def fit_transform(self, X, y=None, **fit_params):
            """Fit X into an embedded space and return the embedding of X."""
            return self._fit_umap("fit_transform", X, y, fit_params)["embedding"]

        def _fit_umap(self, method, X, y, fit_params):
            names = _feature_names(X)
            X = _as_array(X, "X")
            y = None if y is None else _labels(y)
            result = self._call(method, self._fit_inputs(X, y, None, fit_params),
                                progress=True)
            self._finish_fit(names)
            if int(result.get("spectral_init_failures", 0)):
                warnings.warn(_SPECTRAL_WARNING, UserWarning, stacklevel=3)
            return result

    UMAP.__module__ = base.__module__
    UMAP.__qualname__ = "UMAP"  # so pickle finds gsb.manifold.UMAP
    return UMAP
