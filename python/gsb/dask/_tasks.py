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
