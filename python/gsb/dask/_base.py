"""The base of the gsb.dask estimators: partitions, the statistics reduction, lazy
predict/transform, and the conversion to an ordinary gsb estimator.

A fit never brings data to the driver: the inputs are persisted on the workers,
each partition's statistics are computed there by the engine (_tasks.stats),
merged pairwise there (_tasks.merge, a fixed binary tree over the partitions in
order, so the result does not depend on which worker ran what), and only the
merged statistics (a few KB to MB) reach the driver, whose own engine fits the
model from them ("fit_from_stats") or steps an iteration.
"""
import copy

import numpy as np

from .._registry import ALL
from . import _tasks


def _dask():
    try:
        import dask
        import dask.array as da
        from dask.distributed import default_client
    except ImportError as exc:  # pragma: no cover - dask is a test dependency
        raise ImportError("gsb.dask needs dask and distributed: pip install 'dask[array]' "
                          "distributed") from exc
    return dask, da, default_client


def as_dask_array(data, name, ndim=(1, 2)):
    """A dask array of data: dask arrays as they are, dask dataframes and series by
    their values (partition lengths computed), numpy-like data as one chunk."""
    _, da, _ = _dask()
    if data is None:
        return None
    if hasattr(data, "to_dask_array"):
        data = data.to_dask_array(lengths=True)
    elif not isinstance(data, da.Array):
        arr = np.asarray(data.to_numpy() if hasattr(data, "to_numpy") else data)
        data = da.from_array(arr, chunks=arr.shape)
    if data.ndim not in ndim:
        raise ValueError(f"{name} must have {' or '.join(map(str, ndim))} dimension(s), got "
                         f"shape {data.shape}")
    if np.isnan(data.shape[0]):
        data = data.compute_chunk_sizes()
    return data


def _feature_names(X):
    cols = getattr(X, "columns", None)
    if cols is None:
        return None
    names = np.asarray(list(cols), dtype=object)
    return names if len(names) and all(isinstance(c, str) for c in names) else None


class Partitions:
    """Row partitions of X (and y, sample_weight aligned with it) on the workers."""

    def __init__(self, client, X, y=None, sample_weight=None):
        X = as_dask_array(X, "X", ndim=(2,))
        X = X.rechunk({1: -1})  # whole rows in every block
        rows = X.chunks[0]
        y = as_dask_array(y, "y")
        w = as_dask_array(sample_weight, "sample_weight", ndim=(1,))
        for name, a in (("y", y), ("sample_weight", w)):
            if a is not None and a.shape[0] != X.shape[0]:
                raise ValueError(f"Found input variables with inconsistent numbers of samples: "
                                 f"[{X.shape[0]}, {a.shape[0]}] ({name})")
        if y is not None:
            y = y.rechunk({0: rows} if y.ndim == 1 else {0: rows, 1: -1})
        if w is not None:
            w = w.rechunk({0: rows})
        given = [a for a in (X, y, w) if a is not None]
        kept = iter(client.persist(given))
        X, y, w = (None if a is None else next(kept) for a in (X, y, w))
        self.client = client
        self.X, self.y, self.w = X, y, w
        self.n_samples, self.n_features = X.shape
        self.dtype = X.dtype
        offsets = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
        xd = X.to_delayed().ravel()
        yd = y.to_delayed().ravel() if y is not None else [None] * len(xd)
        wd = w.to_delayed().ravel() if w is not None else [None] * len(xd)
        # partitions without rows contribute nothing: the engine refuses empty X
        self.parts = [(xd[i], yd[i], wd[i], int(offsets[i]), rows[i])
                      for i in range(len(xd)) if rows[i] > 0]
        if not self.parts:
            raise ValueError(f"Found array with 0 sample(s) (shape=(0, {self.n_features})) "
                             f"while a minimum of 1 is required.")

    def reduce(self, name, params, method, inputs, options=None, per_part=None):
        """The merged statistics of method over every partition (a numpy array).

        inputs(part) -> the engine inputs of one partition; per_part(i, part) -> extra
        options of partition i (its row offset, say), merged into options."""
        dask, _, _ = _dask()
        tasks = []
        for i, part in enumerate(self.parts):
            opts = dict(options or {})
            if per_part is not None:
                opts.update(per_part(i, part))
            tasks.append(dask.delayed(_tasks.stats, pure=True)(
                name, params, method, inputs(part), opts or None))
        while len(tasks) > 1:
            merged = [dask.delayed(_tasks.merge, pure=True)(name, params, tasks[i], tasks[i + 1])
                      for i in range(0, len(tasks) - 1, 2)]
            if len(tasks) % 2:
                merged.append(tasks[-1])
            tasks = merged
        return self.client.compute(tasks[0]).result()

    def release(self):
        self.X = self.y = self.w = None
        self.parts = []


class DaskEstimator:
    """Common behaviour: parameters as the local estimator's, the client, conversion."""

    _local_name = None  # the gsb estimator this one distributes

    def __init__(self, *, client=None, **params):
        self.client = client
        self._params = dict(params)
        self._local_class()(**params)  # unknown names fail now, as in scikit-learn

    @classmethod
    def _local_class(cls):
        return ALL[cls._local_name]

    # -- parameters --------------------------------------------------------------
    def get_params(self, deep=True):
        params = self._local_class()(**self._params).get_params(deep=False)
        params["client"] = self.client
        return params

    def set_params(self, **params):
        self.client = params.pop("client", self.client)
        self._local_class()(**{**self._params, **params})
        self._params.update(params)
        return self

    def __getattr__(self, name):
        # fitted attributes come from the local model (coef_, cluster_centers_, ...)
        if name.endswith("_") and not name.startswith("__"):
            local = self.__dict__.get("_local")
            if local is not None and hasattr(local, name):
                return getattr(local, name)
        if name in self.__dict__.get("_params", {}):
            return self._params[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self._params.items())
        return f"{type(self).__name__}({args})"

    # -- helpers ----------------------------------------------------------------------
    def _param(self, name):
        """A parameter's value, the local estimator's default when not given."""
        return self._local_class()(**self._params).get_params(deep=False)[name]

    def _get_client(self):
        if self.client is not None:
            return self.client
        _, _, default_client = _dask()
        return default_client()

    def _engine_params(self):
        return dict(self._params)

    def _partitions(self, X, y=None, sample_weight=None):
        return Partitions(self._get_client(), X, y, sample_weight)

    def _fit_local(self, stats, options, feature_names=None, prepare=None, warm=False):
        """The local gsb estimator fitted from merged statistics by the driver's engine;
        warm: from a copy of the previous fit's model (warm_start), when there is one."""
        previous = self.__dict__.get("_local")
        if warm and previous is not None:
            local = copy.deepcopy(previous).set_params(**self._params)
        else:
            local = self._local_class()(**self._params)
        if prepare is not None:
            prepare(local)
        local._call("fit_from_stats", [stats], options)
        local._finish_fit(feature_names)
        self._local = local
        return local

    def _check_fitted(self):
        if self.__dict__.get("_local") is None:
            from sklearn.exceptions import NotFittedError
            raise NotFittedError(f"This {type(self).__name__} instance is not fitted yet. "
                                 f"Call 'fit' with appropriate arguments before using this "
                                 f"estimator.")

    def to_local(self):
        """The fitted model as an ordinary gsb estimator: it predicts anywhere (numpy
        input, any session), pickles, and saves to the model store (.save(name))."""
        self._check_fitted()
        return self._local

    get_combined_model = to_local  # cuML's name

    def _map(self, method, X, out_cols=None, dtype=None, kwargs=None):
        """A lazy dask array: the local model's method on each block of X."""
        dask, da, _ = _dask()
        self._check_fitted()
        X = as_dask_array(X, "X", ndim=(2,)).rechunk({1: -1})
        model = dask.delayed(self._local, pure=True)
        probe = getattr(self._local, method)(np.zeros((1, X.shape[1]), dtype=X.dtype),
                                             **(kwargs or {}))
        probe = np.asarray(probe)
        tail = probe.shape[1:]
        if probe.ndim == 1:
            return X.map_blocks(_tasks.apply, model, method, tail, probe.dtype, kwargs,
                                drop_axis=1, dtype=probe.dtype, meta=probe[:0])
        return X.map_blocks(_tasks.apply, model, method, tail, probe.dtype, kwargs,
                            chunks=(X.chunks[0], tail), dtype=probe.dtype, meta=probe[:0])


def dtype_option(parts):
    return {"dtype": "float32" if parts.dtype == np.float32 else "float64"}
