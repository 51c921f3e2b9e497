"""gsb.dask.decomposition: PCA and TruncatedSVD over the partitions of a Dask collection.

Both fit from the merged centred cross-products of X (the engine's stats_gram: n, the
column means and Xc^T Xc, n_features^2 numbers per partition), so they suit data with
up to a few thousand features; the eigendecomposition runs on the driver."""
from ._base import DaskEstimator, _feature_names, dtype_option


class _GramDecomposition(DaskEstimator):
    def fit(self, X, y=None):
        parts = self._partitions(X)
        stats = parts.reduce(self._local_name, self._engine_params(), "stats_gram",
                             lambda p: [p[0], None, None])
        self._fit_local(stats, dtype_option(parts), _feature_names(X))
        return self

    def transform(self, X):
        return self._map("transform", X)

    def inverse_transform(self, X):
        return self._map("inverse_transform", X)

    def fit_transform(self, X, y=None):
        return self.fit(X).transform(X)


class PCA(_GramDecomposition):
    """scikit-learn's PCA fitted across Dask workers (exact covariance route)."""
    _local_name = "PCA"


class TruncatedSVD(_GramDecomposition):
    """scikit-learn's TruncatedSVD fitted across Dask workers (exact, from X^T X)."""
    _local_name = "TruncatedSVD"
