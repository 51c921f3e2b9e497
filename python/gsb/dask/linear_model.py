"""gsb.dask.linear_model: linear models over the partitions of a Dask collection.

LinearRegression and Ridge fit from the merged centred cross-products of [X | y]
(the engine's stats_gram, weighted by sample_weight), solved on the driver as the
single-process fit solves its normal equations.  LogisticRegression runs the engine's
L-BFGS on the driver (lbfgs_next) over the loss and gradient summed across the
partitions (stats_lossgrad), so it follows the single-process fit step for step."""
from ._base import DaskEstimator, _feature_names, dtype_option


class _GramRegressor(DaskEstimator):
    def fit(self, X, y, sample_weight=None):
        parts = self._partitions(X, y, sample_weight)
        stats = parts.reduce(self._local_name, self._engine_params(), "stats_gram",
                             lambda p: [p[0], p[1], p[2]])
        options = {**dtype_option(parts), "y_1d": parts.y.ndim == 1}
        self._fit_local(stats, options, _feature_names(X))
        return self

    def predict(self, X):
        return self._map("predict", X)


class LinearRegression(_GramRegressor):
    """scikit-learn's LinearRegression fitted across Dask workers."""
    _local_name = "LinearRegression"


class Ridge(_GramRegressor):
    """scikit-learn's Ridge fitted across Dask workers."""
    _local_name = "Ridge"
