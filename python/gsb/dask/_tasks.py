"""What the Dask workers run: one engine call on one partition, or one merge.

Every task here is pure: the same arguments give bitwise the same result, so
when a worker dies and the scheduler runs a task again elsewhere, the fit
goes on with the same numbers.  Each call creates a throw-away engine model
of the estimator (the engine's stats_* and merge_stats methods are stateless)
in the worker's own gsb session: in-process, on the worker's GPU when it has
one (GSB_DEVICE / CUDA_VISIBLE_DEVICES of the worker), else its CPUs.
"""
import numpy as np

from .._registry import ALL


def _array(a):
    return None if a is None else np.ascontiguousarray(a)


def engine_model(name, params):
    """An unfitted gsb estimator of class `name` with its engine model created."""
    est = ALL[name](**params)
    est._model(create=True)
    return est


def call(name, params, method, inputs, options=None):
    """method(*inputs) on a fresh engine model: the result dict (name -> array)."""
    est = engine_model(name, params)
    return est._call(method, [_array(a) for a in inputs], options)


def stats(name, params, method, inputs, options=None):
    """A partition's packed statistics (partial_stats.h)."""
    return call(name, params, method, inputs, options)["stats"]


def merge(name, params, a, b):
    """Two packed statistics merged by the engine."""
    return call(name, params, "merge_stats", [a, b])["stats"]


def apply(X, model, method, empty_shape, empty_dtype, kwargs=None):
    """A fitted local model's method (predict, transform, ...) on one block; a block
    without rows gives an empty result of the right shape."""
    if X.shape[0] == 0:
        return np.empty((0,) + tuple(empty_shape), dtype=empty_dtype)
    return getattr(model, method)(np.ascontiguousarray(X), **(kwargs or {}))


def encode_labels(y, classes):
    """Each label's index into the sorted classes, as float64 (the engine's labels)."""
    return np.searchsorted(classes, np.asarray(y)).astype(np.float64)


def unique(y):
    return np.unique(np.asarray(y))


def fit_part(name, params, X, y=None):
    """A local estimator fitted on one partition (a slice of a distributed index)."""
    est = ALL[name](**params)
    return est.fit(np.ascontiguousarray(X)) if y is None else \
        est.fit(np.ascontiguousarray(X), np.ascontiguousarray(y))


def part_neighbors(model, X, k, offset):
    """A partition's TOPK statistics for the queries X (None: its own rows, leave-one-out)."""
    inputs = [] if X is None else [np.ascontiguousarray(X)]
    return model._call("stats_kneighbors", inputs, {"n_neighbors": int(k),
                                                    "offset": int(offset)})["stats"]


def topk_unpack(stats, dtype):
    """(dist, index, payload) of merged TOPK statistics."""
    s = np.asarray(stats)
    nq, k, t = int(s[2]), int(s[3]), int(s[4])
    p = s[5:]
    dist = p[:nq * k].reshape(nq, k).astype(dtype)
    idx = p[nq * k:2 * nq * k].reshape(nq, k).astype(np.int64)
    return dist, idx, p[2 * nq * k:].reshape(nq, k, t)


def _weights(dist, by_distance):
    """scikit-learn's _get_weights: 1/d, or 1 for the distance-0 neighbours of a row."""
    if not by_distance:
        return np.ones(dist.shape)
    with np.errstate(divide="ignore"):
        w = 1.0 / dist.astype(np.float64)
    inf = np.isinf(w)
    rows = inf.any(axis=1)
    w[rows] = inf[rows]
    return w


def knn_proba(stats, n_classes, by_distance):
    """Class probabilities from merged neighbours whose payload is the class index."""
    dist, _, pay = topk_unpack(stats, np.float64)
    w = _weights(dist, by_distance)
    proba = np.zeros((dist.shape[0], n_classes))
    codes = pay[:, :, 0].astype(np.int64)
    for j in range(dist.shape[1]):
        np.add.at(proba, (np.arange(dist.shape[0]), codes[:, j]), w[:, j])
    total = proba.sum(axis=1, keepdims=True)
    if np.any(total == 0):
        raise ValueError("All neighbors of some sample is getting zero weights. Please modify "
                         "'weights' to avoid this case if you are using a user-defined "
                         "function.")
    return proba / total


def knn_predict(stats, classes, by_distance):
    return classes[np.argmax(knn_proba(stats, len(classes), by_distance), axis=1)]


def knn_regress(stats, by_distance, dtype, one_d):
    dist, _, pay = topk_unpack(stats, np.float64)
    w = _weights(dist, by_distance)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (np.einsum("qk,qkt->qt", w, pay) / w.sum(axis=1)[:, None]).astype(dtype)
    return out[:, 0] if one_d else out


def forest_part(name, params, X, y, w=None):
    """A forest grown on one partition (its share of the trees), packed by the engine."""
    est = ALL[name](**params)
    kwargs = {} if w is None else {"sample_weight": np.ascontiguousarray(w)}
    est.fit(np.ascontiguousarray(X), np.ascontiguousarray(y), **kwargs)
    return est._call("export_trees", [])["trees"]


def merge_trees(name, params, a, b):
    """Two packed forests concatenated by the engine (a's trees first)."""
    return call(name, params, "merge_trees", [a, b])["trees"]
