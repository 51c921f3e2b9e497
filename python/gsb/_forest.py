"""What the random forests add to their generated classes (gsb.ensemble).

The engine keeps a fitted forest as flat arrays (every tree's nodes
concatenated); Python adds what scikit-learn users reach for and the engine
cannot say: `estimators_` as light per-tree views (node count, depth, leaves),
`apply`, estimator tags (NaN accepted,
several outputs for the regressor), class_weight keys for non-numeric labels,
a clear error for a callable oob_score, and scikit-learn's constructor (the
engine's cuML parameters n_bins and split_criterion are the cuml shim's).
"""
import inspect

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
    return self._call("apply", [self._input(X)])["leaves"]


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


# cuML's parameters the engine takes too; gsb's classes keep scikit-learn's parameters
# exactly, the cuml shim's forests add these (python/cuml_shim/cuml/_classes.py)
CUML_PARAMS = {"n_bins": 128, "split_criterion": None}


def _sklearn_init(base_init):
    """base_init without the cuML-only parameters (they keep their engine defaults)."""
    signature = inspect.signature(base_init)
    params = [p for p in signature.parameters.values() if p.name not in CUML_PARAMS]

    def __init__(self, *args, **kwargs):
        base_init(self, *args, **kwargs)
        for name in CUML_PARAMS:
            self.__dict__.pop(name, None)
    __init__.__signature__ = signature.replace(parameters=params)
    __init__.__qualname__ = base_init.__qualname__
    return __init__


def patch(classes):
    """Add the forest behaviour to the generated classes of `classes` (name -> class)."""
    _estimator._MULTI_OUTPUT.add("RandomForestRegressor")
    for name in FORESTS:
        cls = classes.get(name)
        if cls is None or not hasattr(cls, "_gsb_desc"):
            continue
        cls.__init__ = _sklearn_init(cls.__init__)
        cls._cuml_params = CUML_PARAMS
        cls.estimators_ = property(_estimators, doc="The fitted trees as light views "
                                   "(node_count, max_depth, n_leaves).")
        cls.apply = _apply
        cls._engine_params = _engine_params
        cls.__sklearn_tags__ = _tags(cls)
    return classes


__all__ = ["patch", "TreeView"]
