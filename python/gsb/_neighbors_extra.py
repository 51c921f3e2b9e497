"""What the neighbours estimators and DBSCAN add on top of the generated classes.

radius_neighbors and radius_neighbors_graph (NearestNeighbors) and
kneighbors_graph (NearestNeighbors, KNeighborsClassifier, KNeighborsRegressor)
turn the engine's CSR pieces (indptr, indices, distances) into scikit-learn's
ragged object arrays and scipy.sparse CSR graphs.  DBSCAN's fit passes
scikit-learn's working_memory to the engine as its memory budget, refuses a
callable metric in the project's words before the engine is asked, and warns
as scikit-learn does for minkowski with p < 1.
"""
import warnings

import numpy as np

from ._convert import as_array
from ._estimator import _callable_param_error, _fit_feature_names, _named_method

_MODE_ERROR = ('Unsupported mode, must be one of "connectivity", or "distance" but got '
               '"{}" instead')


def _working_memory():
    from sklearn import get_config
    return get_config().get("working_memory", 1024)


def _align_sparse(graph):
    """scipy.sparse as scikit-learn's sparse_interface config asks (csr_matrix by default)."""
    try:
        from sklearn.utils._sparse import _align_api_if_sparse
    except ImportError:  # an older scikit-learn: its graphs were csr_matrix
        import scipy.sparse as sp
        return sp.csr_matrix(graph)
    return _align_api_if_sparse(graph)


def _csr_array(data, indices, indptr, shape):
    import scipy.sparse as sp
    return sp.csr_array((data, indices, indptr), shape=shape)


def _object_rows(values, indptr):
    """One array per row, in a 1-D object array (scikit-learn's ragged results)."""
    out = np.empty(len(indptr) - 1, dtype=object)
    out[:] = [values[a:b] for a, b in zip(indptr[:-1], indptr[1:])]
    return out


def _radius_csr(self, X, radius, return_distance, sort_results):
    options = {"return_distance": bool(return_distance), "sort_results": bool(sort_results),
               "working_memory": _working_memory()}
    if radius is not None:
        options["radius"] = float(radius)
    res = self._call("radius_neighbors", [None if X is None else as_array(X, "X", self)],
                     options)
    return res["indptr"], res["indices"], res.get("distances")


def radius_neighbors(self, X=None, radius=None, return_distance=True, sort_results=False):
    """Find the training samples within radius of each query point (X None: of each
    training sample, itself excluded).  Returns (neigh_dist, neigh_ind) as 1-D object
    arrays of arrays, or neigh_ind alone when return_distance is False; each row ascends
    by index, or by distance with sort_results=True."""
    if sort_results and not return_distance:
        raise ValueError("return_distance must be True if sort_results is True.")
    indptr, ind, dist = _radius_csr(self, X, radius, return_distance, sort_results)
    neigh_ind = _object_rows(ind, indptr)
    if return_distance:
        return _object_rows(dist, indptr), neigh_ind
    return neigh_ind


def radius_neighbors_graph(self, X=None, radius=None, mode="connectivity",
                           sort_results=False):
    """The (weighted) graph of the neighbours within radius, a sparse CSR matrix of
    shape (n_queries, n_samples_fit): ones ('connectivity') or distances ('distance')."""
    if mode not in ("connectivity", "distance"):
        raise ValueError(_MODE_ERROR.format(mode))
    distance = mode == "distance"
    indptr, ind, dist = _radius_csr(self, X, radius, distance, sort_results and distance)
    data = dist if distance else np.ones(len(ind))
    return _align_sparse(_csr_array(data, ind, indptr, (len(indptr) - 1, self.n_samples_fit_)))


def kneighbors_graph(self, X=None, n_neighbors=None, mode="connectivity"):
    """The (weighted) graph of the k nearest neighbours, a sparse CSR matrix of shape
    (n_queries, n_samples_fit): ones ('connectivity') or distances ('distance')."""
    if n_neighbors is None:
        n_neighbors = self.n_neighbors
    if mode == "connectivity":
        ind = self.kneighbors(X, n_neighbors, return_distance=False)
        data = np.ones(ind.size)
    elif mode == "distance":
        data, ind = self.kneighbors(X, n_neighbors, return_distance=True)
        data = np.ravel(data)
    else:
        raise ValueError(_MODE_ERROR.format(mode))
    n_queries = ind.shape[0]
    indptr = np.arange(0, n_queries * n_neighbors + 1, n_neighbors)
    return _align_sparse(_csr_array(data, ind.ravel(), indptr,
                                    (n_queries, self.n_samples_fit_)))


def dbscan_fit(self, X, y=None, sample_weight=None):
    """Perform DBSCAN clustering from features, or from a distance matrix with
    metric='precomputed'.  y is ignored; sample_weight may be negative."""
    if callable(self.metric):
        raise _callable_param_error(self, "metric", self.metric)
    if self.metric == "minkowski" and self.p is not None and 0 < self.p < 1:
        warnings.warn("Mind that for 0 < p < 1, Minkowski metrics are not distance metrics. "
                      "Continuing the execution with `algorithm='brute'`.", UserWarning,
                      stacklevel=2)
    names = _fit_feature_names(X)
    X = as_array(X, "X", self)
    if sample_weight is not None:
        sample_weight = as_array(sample_weight, "sample_weight", self)
        if getattr(sample_weight, "ndim", 1) == 0 and hasattr(X, "shape"):
            sample_weight = np.full(X.shape[0], sample_weight, dtype=np.float64)
    self._call("fit", [X, None, sample_weight], {"working_memory": _working_memory()},
               progress=True)
    self._finish_fit(names)
    return self


def _attach(cls, fn, name):
    setattr(cls, name, _named_method(fn, name, cls.__name__, cls.__module__))


def install(by_module):
    """Attach the methods above to the generated classes."""
    nbrs = by_module.get("neighbors", {})
    for name in ("NearestNeighbors", "KNeighborsClassifier", "KNeighborsRegressor"):
        if name in nbrs:
            _attach(nbrs[name], kneighbors_graph, "kneighbors_graph")
    if "NearestNeighbors" in nbrs:
        _attach(nbrs["NearestNeighbors"], radius_neighbors, "radius_neighbors")
        _attach(nbrs["NearestNeighbors"], radius_neighbors_graph, "radius_neighbors_graph")
    dbscan = by_module.get("cluster", {}).get("DBSCAN")
    if dbscan is not None:
        _attach(dbscan, dbscan_fit, "fit")
