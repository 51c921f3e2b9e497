"""gsb.dask.neighbors: nearest neighbours over an index that stays distributed.

fit keeps one fitted gsb model per partition on the workers (the training rows
never move).  A query block is searched against every partition there (the
engine's stats_kneighbors: the partition's top k with global row indices and the
neighbours' targets), and the per-partition results are merged by the engine
(merge_stats: the k smallest distances, ties to the smaller global index, exactly
the single-process order).  kneighbors returns global indices; the classifier and
regressor vote from the merged neighbours' targets.  Results are lazy dask arrays,
one block per query block."""
import numpy as np

from . import _tasks
from ._base import DaskEstimator, _dask, as_dask_array


class NearestNeighbors(DaskEstimator):
    """scikit-learn's NearestNeighbors with its index spread over the Dask workers."""

    _local_name = "NearestNeighbors"

    def _fit_index(self, X, y=None):
        dask, _, _ = _dask()
        parts = self._partitions(X, y)
        name, params = self._local_name, self._engine_params()
        models = [dask.delayed(_tasks.fit_part, pure=True)(name, params, p[0], p[1])
                  for p in parts.parts]
        self._models = parts.client.persist(models)
        self._parts = parts
        self._X, self._y = X, y
        self.n_samples_fit_ = parts.n_samples
        self.n_features_in_ = parts.n_features
        self._local = None
        return self

    def fit(self, X, y=None):
        return self._fit_index(X)

    def _check_fitted(self):
        if self.__dict__.get("_models") is None:
            from sklearn.exceptions import NotFittedError
            raise NotFittedError(f"This {type(self).__name__} instance is not fitted yet. "
                                 f"Call 'fit' with appropriate arguments before using this "
                                 f"estimator.")

    def _k(self, n_neighbors, self_query):
        k = self._param("n_neighbors") if n_neighbors is None else int(n_neighbors)
        n_fit = self.n_samples_fit_
        if k <= 0:
            raise ValueError(f"Expected n_neighbors > 0. Got {k}")
        if (k >= n_fit) if self_query else (k > n_fit):
            raise ValueError(f"Expected n_neighbors {'<' if self_query else '<='} "
                             f"n_samples_fit, but n_neighbors = {k}, n_samples_fit = {n_fit}, "
                             f"n_samples = {n_fit if self_query else 'len(X)'}")
        return k

    def _merged(self, X, k):
        """Per query block: (delayed merged TOPK statistics, rows, dtype)."""
        dask, _, _ = _dask()
        name, params = self._local_name, self._engine_params()
        parts = self._parts.parts
        if X is None:
            blocks = [(i, p[0], p[4]) for i, p in enumerate(parts)]
            dtype = self._parts.dtype
        else:
            X = as_dask_array(X, "X", ndim=(2,)).rechunk({1: -1})
            blocks = [(None, b, r) for b, r in zip(X.to_delayed().ravel(), X.chunks[0])]
            dtype = X.dtype
        out = []
        for own, block, rows in blocks:
            tasks = [dask.delayed(_tasks.part_neighbors, pure=True)(
                         model, None if own == j else block, k, parts[j][3])
                     for j, model in enumerate(self._models)]
            while len(tasks) > 1:
                merged = [dask.delayed(_tasks.merge, pure=True)(name, params, tasks[i],
                                                                tasks[i + 1])
                          for i in range(0, len(tasks) - 1, 2)]
                tasks = merged + ([tasks[-1]] if len(tasks) % 2 else [])
            out.append((tasks[0], rows))
        return out, np.dtype(dtype if np.dtype(dtype).kind == "f" else np.float64)

    def kneighbors(self, X=None, n_neighbors=None, return_distance=True):
        """Distances and global indices of the nearest training rows (lazy)."""
        dask, da, _ = _dask()
        self._check_fitted()
        k = self._k(n_neighbors, X is None)
        merged, dtype = self._merged(X, k)
        dists, idxs = [], []
        for m, rows in merged:
            unpacked = dask.delayed(_tasks.topk_unpack, pure=True, nout=3)(m, dtype)
            dists.append(da.from_delayed(unpacked[0], shape=(rows, k), dtype=dtype))
            idxs.append(da.from_delayed(unpacked[1], shape=(rows, k), dtype=np.int64))
        dist, idx = da.concatenate(dists), da.concatenate(idxs)
        return (dist, idx) if return_distance else idx

    def _vote(self, X, fn, shape_tail, dtype, *args):
        dask, da, _ = _dask()
        self._check_fitted()
        merged, _ = self._merged(X, self._k(None, X is None))
        blocks = [da.from_delayed(dask.delayed(fn, pure=True)(m, *args),
                                  shape=(rows,) + shape_tail, dtype=dtype)
                  for m, rows in merged]
        return da.concatenate(blocks)

    def to_local(self):
        """An ordinary gsb estimator fitted on the whole training data (which this
        brings to the driver: the one call here that moves the index)."""
        self._check_fitted()
        if self.__dict__.get("_local") is None:
            X = as_dask_array(self._X, "X", ndim=(2,)).compute()
            local = self._local_class()(**self._params)
            self._local = local.fit(X) if self._y is None else \
                local.fit(X, as_dask_array(self._y, "y").compute())
        return self._local

    get_combined_model = to_local


class KNeighborsClassifier(NearestNeighbors):
    """scikit-learn's KNeighborsClassifier over a distributed index."""

    _local_name = "KNeighborsClassifier"

    def fit(self, X, y):
        dask, _, _ = _dask()
        y = as_dask_array(y, "y", ndim=(1,))
        per_block = [dask.delayed(_tasks.unique, pure=True)(b) for b in y.to_delayed().ravel()]
        self.classes_ = np.unique(np.concatenate(
            self._get_client().compute(per_block, sync=True)))
        codes = y.map_blocks(_tasks.encode_labels, self.classes_, dtype=np.float64)
        self._fit_index(X, codes)
        self._y = y
        return self

    def predict_proba(self, X=None):
        return self._vote(X, _tasks.knn_proba, (len(self.classes_),), np.float64,
                          len(self.classes_), self._param("weights") == "distance")

    def predict(self, X=None):
        return self._vote(X, _tasks.knn_predict, (), self.classes_.dtype, self.classes_,
                          self._param("weights") == "distance")


class KNeighborsRegressor(NearestNeighbors):
    """scikit-learn's KNeighborsRegressor over a distributed index."""

    _local_name = "KNeighborsRegressor"

    def fit(self, X, y):
        return self._fit_index(X, as_dask_array(y, "y"))

    def predict(self, X=None):
        y = self._parts.y
        one_d = y.ndim == 1
        tail = () if one_d else (y.shape[1],)
        dtype = self._parts.dtype if np.dtype(self._parts.dtype).kind == "f" else np.float64
        return self._vote(X, _tasks.knn_regress, tail, dtype,
                          self._param("weights") == "distance", dtype, one_d)
