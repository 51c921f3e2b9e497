"""gsb.dask.preprocessing: StandardScaler over the partitions of a Dask collection."""
from ._base import DaskEstimator, _feature_names


class StandardScaler(DaskEstimator):
    """scikit-learn's StandardScaler fitted across Dask workers: each partition's count,
    mean and centred sum of squares (the engine's stats_moments), merged exactly by the
    pairwise update; transform returns a lazy dask array."""

    _local_name = "StandardScaler"

    def fit(self, X, y=None, sample_weight=None):
        parts = self._partitions(X, None, sample_weight)
        stats = parts.reduce(self._local_name, self._engine_params(), "stats_moments",
                             lambda p: [p[0], p[2]])
        self._fit_local(stats, {"weighted": sample_weight is not None}, _feature_names(X))
        return self

    def transform(self, X):
        return self._map("transform", X)

    def inverse_transform(self, X):
        return self._map("inverse_transform", X)

    def fit_transform(self, X, y=None, sample_weight=None):
        return self.fit(X, y, sample_weight).transform(X)
