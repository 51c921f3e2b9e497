"""gsb.dask.linear_model: linear models over the partitions of a Dask collection.

LinearRegression and Ridge fit from the merged centred cross-products of [X | y]
(the engine's stats_gram, weighted by sample_weight), solved on the driver as the
single-process fit solves its normal equations; Lasso and ElasticNet run the estimator's
Gram coordinate descent (its precompute path) on them.  LogisticRegression runs the
engine's L-BFGS on the driver (lbfgs_next) over the loss and gradient summed across the
partitions (stats_lossgrad), so it follows the single-process fit step for step."""
import numpy as np

from . import _tasks
from ._base import DaskEstimator, _feature_names, dtype_option


class _GramRegressor(DaskEstimator):
    def fit(self, X, y, sample_weight=None):
        parts = self._partitions(X, y, sample_weight)
        stats = parts.reduce(self._local_name, self._engine_params(), "stats_gram",
                             lambda p: [p[0], p[1], p[2]])
        options = {**dtype_option(parts), "y_1d": parts.y.ndim == 1}
        self._fit_local(stats, options, _feature_names(X),
                        warm=bool(self._params.get("warm_start", False)))
        return self

    def predict(self, X):
        return self._map("predict", X)


class LinearRegression(_GramRegressor):
    """scikit-learn's LinearRegression fitted across Dask workers."""
    _local_name = "LinearRegression"


class Ridge(_GramRegressor):
    """scikit-learn's Ridge fitted across Dask workers."""
    _local_name = "Ridge"


class Lasso(_GramRegressor):
    """scikit-learn's Lasso fitted across Dask workers: the estimator's own coordinate
    descent on the Gram matrix (its precompute path, scikit-learn's duality-gap stopping
    rule) run by the driver's engine on the merged X^T X, X^T y.  Every option applies
    (positive, several targets, sample_weight, fit_intercept, selection='random',
    warm_start from the previous distributed fit)."""
    _local_name = "Lasso"


class ElasticNet(_GramRegressor):
    """scikit-learn's ElasticNet fitted across Dask workers (as Lasso: the Gram
    coordinate descent on the merged statistics)."""
    _local_name = "ElasticNet"


class LogisticRegression(DaskEstimator):
    """scikit-learn's LogisticRegression fitted across Dask workers: the engine's L-BFGS
    on the driver (lbfgs_next, reverse communication by replay) over the loss and
    gradient summed across the partitions (stats_lossgrad), one pass over the data per
    function evaluation.  L2 penalty or none; labels of any type."""

    _local_name = "LogisticRegression"

    def _classes(self, y):
        """The sorted classes of y, from each partition's unique values."""
        from ._base import _dask
        dask, da, _ = _dask()
        per_block = [dask.delayed(_tasks.unique, pure=True)(b) for b in y.to_delayed().ravel()]
        client = self._get_client()
        return np.unique(np.concatenate(client.compute(per_block, sync=True)))

    def _class_weight(self, classes, y_enc, w):
        cw = self._param("class_weight")
        K = len(classes)
        if cw is None:
            return None
        if isinstance(cw, str):  # 'balanced': sum(w) / (K * weighted bincount)
            from ._base import _dask
            _, da, _ = _dask()
            counts = da.bincount(y_enc.astype(np.int64), weights=w, minlength=K).compute()
            return [float(np.sum(counts) / (K * c)) if c > 0 else 1.0 for c in counts]
        return [float(cw.get(c, cw.get(str(c), 1.0))) for c in classes.tolist()]

    def fit(self, X, y, sample_weight=None):
        from ._base import as_dask_array
        name, params = self._local_name, self._engine_params()
        y = as_dask_array(y, "y", ndim=(1,))
        classes = self._classes(y)
        if len(classes) < 2:
            raise ValueError(f"This solver needs samples of at least 2 classes in the data, "
                             f"but the data contains only one class: {classes[0]!r}")
        y_enc = y.map_blocks(_tasks.encode_labels, classes, dtype=np.float64)
        parts = self._partitions(X, y_enc, sample_weight)
        K, d = len(classes), parts.n_features
        cw = self._class_weight(classes, parts.y, parts.w)
        options = {"n_classes": K, **({"class_weight": cw} if cw is not None else {})}
        R, p = (1 if K == 2 else K), d + (1 if self._param("fit_intercept") else 0)
        x, history = np.zeros(R * p), []
        while True:
            stats = parts.reduce(name, params, "stats_lossgrad",
                                 lambda q: [q[0], q[1], q[2], x], options)
            history.append(np.concatenate([x, np.asarray(stats)[5:]]))
            step = _tasks.call(name, params, "lbfgs_next", [np.vstack(history)],
                               {"n_features": d})
            if int(step["done"]):
                break
            x = np.asarray(step["x"], dtype=np.float64)
        numeric = classes.dtype.kind in "iuf" and classes.dtype.kind != "b"

        def labels(local):
            local.__dict__["_gsb_labels"] = (None, classes.dtype) if numeric else (classes, None)

        engine_classes = classes.astype(np.float64) if numeric else np.arange(K, dtype=np.float64)
        local = self._local_class()(**self._params)
        labels(local)
        local._call("fit_from_stats", [np.vstack(history), engine_classes],
                    {"n_features": d, **dtype_option(parts)})
        local._finish_fit(_feature_names(X))
        self._local = local
        return self

    def predict(self, X):
        return self._map("predict", X)

    def predict_proba(self, X):
        return self._map("predict_proba", X)

    def decision_function(self, X):
        return self._map("decision_function", X)
