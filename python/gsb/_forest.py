"""What the random forests add to their generated classes (gsb.ensemble).

The engine keeps a fitted forest as flat arrays (every tree's nodes
concatenated); Python adds what scikit-learn users reach for and the engine
cannot say: `estimators_` as light per-tree views (node count, depth, leaves),
`apply`, scikit-learn's warm-start warning, estimator tags (NaN accepted,
several outputs for the regressor), class_weight keys for non-numeric labels,
and a clear error for a callable oob_score.
"""
import warnings

import numpy as np

from . import _estimator, _lib

FORESTS = ("RandomForestClassifier", "RandomForestRegressor")


class TreeView:
    """One fitted tree of a gsb forest: its size and depth (the nodes live in the
    engine; gsb has no per-tree DecisionTree object)."""

    def __init__(self, index, n_leaves, depth):
        self.index = index
        self.n_leaves = int(n_leaves)
        self.node_count = 2 * self.n_leaves - 1
        self.max_depth = int(depth)

    @property
    def tree_(self):
        return self  # node_count, max_depth, n_leaves as on scikit-learn's Tree

    def get_depth(self):
        return self.max_depth

    def get_n_leaves(self):
        return self.n_leaves

    def __repr__(self):
        return (f"TreeView(index={self.index}, node_count={self.node_count}, "
                f"max_depth={self.max_depth})")


def _fitted(est):
    model = est.__dict__.get("_gsb_handle")
    return model is not None and bool(_lib.lib.gsb_model_is_fitted(model.handle))


def _estimators(self):
    if not _fitted(self):
        raise AttributeError(f"'{type(self).__name__}' object has no attribute 'estimators_'")
    info = self._call("tree_info", [])
    return [TreeView(i, n, d) for i, (n, d) in enumerate(zip(info["n_leaves"], info["depth"]))]


def _apply(self, X):
    """Leaf index of each row in each tree, (n_samples, n_estimators) int64 (gsb's
    node numbering within each tree)."""
    return self._call("apply", [_estimator._as_array(X, "X")])["leaves"]


def _make_fit(engine_fit):
    def fit(self, X, y=None, sample_weight=None):
        if self.warm_start and _fitted(self):
            n_trees = len(self._call("tree_info", [])["depth"])
            if self.n_estimators == n_trees:
                warnings.warn("Warm-start fitting without increasing n_estimators does not "
                              "fit new trees.", UserWarning, stacklevel=2)
        return engine_fit(self, X, y, sample_weight)
    fit.__doc__ = engine_fit.__doc__
    return fit


def _engine_params(self, params):
    if callable(params.get("oob_score")):
        raise NotImplementedError(f"{type(self).__name__}: a callable oob_score is not "
                                  f"supported by gsb; pass True or False")
    out = _estimator.GsbEstimator._engine_params(self, params)
    classes, _ = self.__dict__.get("_gsb_labels", (None, None))
    weights = params.get("class_weight")
    if classes is not None and isinstance(weights, dict):
        # labels the engine sees as their index in classes_
        index = {c: i for i, c in enumerate(classes.tolist())}
        out["class_weight"] = {str(index.get(k, k)): float(v) for k, v in weights.items()}
    return out


def _tags(cls):
    def __sklearn_tags__(self):
        tags = super(cls, self).__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.target_tags.multi_output = cls.__name__ == "RandomForestRegressor"
        return tags
    return __sklearn_tags__


def patch(classes):
    """Add the forest behaviour to the generated classes of `classes` (name -> class)."""
    _estimator._MULTI_OUTPUT.add("RandomForestRegressor")
    for name in FORESTS:
        cls = classes.get(name)
        if cls is None or not hasattr(cls, "_gsb_desc"):
            continue
        cls.estimators_ = property(_estimators, doc="The fitted trees as light views "
                                   "(node_count, max_depth, n_leaves).")
        cls.apply = _apply
        cls.fit = _make_fit(cls.fit)
        cls._engine_params = _engine_params
        cls.__sklearn_tags__ = _tags(cls)
    return classes


__all__ = ["patch", "TreeView"]
