"""gsb.dask.cluster: KMeans over the partitions of a Dask collection.

The driver runs the single-process fit's Lloyd loop (kmeans.c's lloyd()) with the
engine's distributed steps: stats_lloyd on every partition (sums, counts, inertia;
the farthest points when a cluster empties), merged on the workers, then lloyd_step
on the driver (relocation, averaging, shift).  From the same init it reaches the same
centres and labels as gsb.cluster.KMeans on the concatenated data.  init='k-means||'
(the default here, also spelt 'scalable-k-means++' as in cuML, or 'k-means++') is the
scalable k-means++ of Bahmani et al.: a few rounds of oversampling on the workers,
then a weighted k-means++ of the candidates on the driver."""
import warnings

import numpy as np

from .._registry import ALL
from . import _tasks
from ._base import DaskEstimator, _feature_names

_HEAD = 5  # the packed statistics' header (partial_stats.h)


def _payload(stats):
    return np.asarray(stats)[_HEAD:]


class KMeans(DaskEstimator):
    """scikit-learn's KMeans fitted across Dask workers (Lloyd; k-means|| init).

    Extra parameters: oversampling_factor (k-means||: about oversampling_factor *
    n_clusters candidates per round, default 2.0) and init_rounds (k-means|| rounds,
    default 5, as cuML's 'scalable-k-means++')."""

    _local_name = "KMeans"
    _SCALABLE = ("k-means||", "scalable-k-means++", "k-means++")

    def __init__(self, *, client=None, oversampling_factor=2.0, init_rounds=5, **params):
        super().__init__(client=client, **params)
        self.oversampling_factor = oversampling_factor
        self.init_rounds = init_rounds

    def _engine_params(self):
        params = dict(self._params)
        init = params.get("init", "k-means++")
        if not isinstance(init, str) or init in self._SCALABLE:
            params["init"] = "k-means++"  # the engine's own fit never runs here
        return params

    def get_params(self, deep=True):
        params = super().get_params(deep)
        params.update(oversampling_factor=self.oversampling_factor, init_rounds=self.init_rounds)
        return params

    # -- driver-side engine calls -------------------------------------------------------
    def _step(self, method, inputs, options=None):
        return _tasks.call(self._local_name, self._engine_params(), method, inputs, options)

    def _lloyd(self, parts, centres, shift, far=0):
        return parts.reduce(self._local_name, self._engine_params(), "stats_lloyd",
                            lambda p: [p[0], p[2], centres, shift],
                            {"far": far} if far else None,
                            per_part=(lambda i, p: {"offset": p[3]}) if far else None)

    # -- initialisation -------------------------------------------------------------------
    def _pick_rows(self, parts, rng, count):
        """count distinct global rows drawn with probability proportional to the weights."""
        n = parts.n_samples
        wmax = float(parts.w.max().compute()) if parts.w is not None else 1.0
        if not wmax > 0:
            raise ValueError("Sample weights must contain at least one non-zero number.")
        picked = []
        while len(picked) < count:
            r = int(rng.integers(n))
            if r in picked:
                continue
            if parts.w is None or rng.random() * wmax < float(parts.w[r].compute()):
                picked.append(r)
        return picked

    def _rows(self, parts, idx, shift, dt):
        rows = np.asarray(parts.X[np.asarray(idx)].compute(), dtype=np.float64)
        return (rows - shift).astype(dt).astype(np.float64)

    def _init_scalable(self, parts, shift, dt, rng):
        name, params, k = self._local_name, self._engine_params(), self._param("n_clusters")
        C = self._rows(parts, self._pick_rows(parts, rng, 1), shift, dt)
        seed = int(rng.integers(2**62))
        shift_row = shift.reshape(1, -1)

        def cost(C):
            s = parts.reduce(name, params, "stats_kmeans_par",
                             lambda p: [p[0], p[2], C, shift_row], {"phase": "cost"})
            return float(_payload(s)[0])

        phi = cost(C)
        rounds = 0
        while phi > 0 and (rounds < self.init_rounds or (len(C) < k and rounds < 4 * self.init_rounds)):
            sample = parts.reduce(name, params, "stats_kmeans_par",
                                  lambda p: [p[0], p[2], C, shift_row],
                                  {"phase": "sample", "phi": phi, "seed": seed, "round": rounds,
                                   "l": float(self.oversampling_factor) * k},
                                  per_part=lambda i, p: {"offset": p[3]})
            new = _payload(sample).reshape(-1, parts.n_features)
            C = np.vstack([C, new]) if len(new) else C
            rounds += 1
            phi = cost(C)
        if len(C) < k:
            raise ValueError(f"n_samples={parts.n_samples} should be >= n_clusters={k}: "
                             f"k-means|| found only {len(C)} distinct candidates")
        weights = _payload(self._lloyd(parts, C, shift_row))[1:1 + len(C)]
        local = ALL["KMeans"](n_clusters=k, init="k-means++", n_init=1,
                              random_state=int(rng.integers(2**31)))
        local.fit(C.astype(dt), sample_weight=weights)
        return np.asarray(local.cluster_centers_, dtype=np.float64)

    def _init(self, parts, shift, dt, rng):
        init, k = self._param("init"), self._param("n_clusters")
        if not isinstance(init, str):
            init = np.asarray(init, dtype=np.float64)
            if init.shape != (k, parts.n_features):
                raise ValueError(f"The shape of the initial centers {init.shape} does not "
                                 f"match the number of clusters {k}.")
            n_init = self._param("n_init")
            if n_init != "auto" and n_init != 1:
                warnings.warn("Explicit initial center position passed: performing only one "
                              f"init in KMeans instead of n_init={n_init}.", RuntimeWarning,
                              stacklevel=3)
            return (init - shift).astype(dt).astype(np.float64)
        if init == "random":
            return self._rows(parts, self._pick_rows(parts, rng, k), shift, dt)
        if init not in self._SCALABLE:
            raise ValueError(f"The 'init' parameter of KMeans must be a str among "
                             f"{{'k-means||', 'k-means++', 'random', 'scalable-k-means++'}} "
                             f"or an array-like. Got {init!r} instead.")
        return self._init_scalable(parts, shift, dt, rng)

    # -- fit ----------------------------------------------------------------------------------
    def fit(self, X, y=None, sample_weight=None):
        name, params = self._local_name, self._engine_params()
        k = self._param("n_clusters")
        parts = self._partitions(X, None, sample_weight)
        if parts.n_samples < k:
            raise ValueError(f"n_samples={parts.n_samples} should be >= n_clusters={k}.")
        dt = np.float32 if parts.dtype == np.float32 else np.float64
        d, n = parts.n_features, parts.n_samples
        # the unweighted column means and variances, as the single-process fit takes them
        mom = _payload(parts.reduce(name, params, "stats_moments", lambda p: [p[0], None]))
        shift = mom[2:2 + d].astype(dt).astype(np.float64)
        tol = float(self._param("tol"))
        tol_abs = 0.0 if tol == 0 else tol * float(np.mean(
            (mom[2 + d:2 + 2 * d] / n).astype(dt).astype(np.float64)))
        rng = np.random.default_rng(self._param("random_state"))
        centres = self._init(parts, shift, dt, rng)
        shift_row = shift.reshape(1, -1)
        opts = {"dtype": np.dtype(dt).name}
        max_iter = int(self._param("max_iter"))
        moved, stats = True, None
        for it in range(max_iter):
            stats = self._lloyd(parts, centres, shift_row)
            counts = _payload(stats)[1:1 + k]
            n_empty = int(np.sum(counts == 0))
            far = self._lloyd(parts, centres, shift_row, far=n_empty) if n_empty else None
            step = self._step("lloyd_step", [stats, far, centres], opts)
            centres = np.asarray(step["centers"], dtype=np.float64)
            moved = bool(step["moved"])
            if not moved or float(step["shift"]) <= tol_abs:
                break
        n_iter = it + 1
        if moved:  # the labels and inertia of the final centres
            stats = self._lloyd(parts, centres, shift_row)
        local = self._local_class()(**params)
        local._call("fit_from_stats", [stats, centres, shift_row], {**opts, "n_iter": n_iter})
        local._finish_fit(_feature_names(X))
        self._local = local
        self.labels_ = self.predict(parts.X)
        return self

    def predict(self, X):
        return self._map("predict", X)

    def transform(self, X):
        return self._map("transform", X)

    def fit_predict(self, X, y=None, sample_weight=None):
        return self.fit(X, sample_weight=sample_weight).labels_

    def score(self, X, y=None, sample_weight=None):
        """Opposite of the inertia of X (summed over the partitions on the workers)."""
        self._check_fitted()
        parts = self._partitions(X, None, sample_weight)
        centres = np.asarray(self._local.cluster_centers_, dtype=np.float64)
        zero = np.zeros((1, parts.n_features))
        stats = parts.reduce(self._local_name, self._engine_params(), "stats_lloyd",
                             lambda p: [p[0], p[2], centres, zero])
        return -float(_payload(stats)[0])
