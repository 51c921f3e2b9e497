"""gsb.dask.ensemble: random forests whose trees are grown where the data is.

As cuML's dask forests: each partition grows its share of the n_estimators trees
(shares in proportion to its rows) on its own rows, bootstrap within them, with a
seed derived from random_state and the partition's position; the partitions'
forests, packed by the engine (export_trees), are concatenated in partition order by
the engine's merge_trees on the workers (a fixed binary tree, as the statistics
reductions), and the driver's engine turns the result into one ordinary gsb forest
(fit_from_trees).  Only the packed trees move.  Deterministic given random_state and
the partitioning; not the single-process forest (each tree sees one partition's rows),
but of its quality when partitions are samples of the same data.  oob_score and
warm_start are not supported (as in cuML's dask forests)."""
import numpy as np

from . import _tasks
from ._base import DaskEstimator, _dask, _feature_names, as_dask_array


def tree_shares(rows, n_estimators):
    """n_estimators split in proportion to rows (largest remainders, ties to the
    earlier partition)."""
    rows = np.asarray(rows, dtype=np.float64)
    exact = n_estimators * rows / rows.sum()
    shares = np.floor(exact).astype(np.int64)
    order = np.argsort(-(exact - shares), kind="stable")
    shares[order[:n_estimators - int(shares.sum())]] += 1
    return shares


class _Forest(DaskEstimator):

    def _seed(self):
        rs = self._param("random_state")
        if rs is None:
            return int(np.random.default_rng().integers(2 ** 32))
        if isinstance(rs, np.random.RandomState):
            return int(rs.randint(2 ** 32, dtype=np.uint64))
        return int(rs)

    def _check_supported(self):
        for name in ("oob_score", "warm_start"):
            if self._param(name):
                raise NotImplementedError(f"gsb.dask's {type(self).__name__} does not support "
                                          f"{name}=True: fit the local estimator for it")

    def _grow(self, X, y, sample_weight):
        """The packed trees of every partition, merged in partition order."""
        dask, _, _ = _dask()
        self._check_supported()
        parts = self._partitions(X, y, sample_weight)
        name, params = self._local_name, self._engine_params()
        T = int(self._param("n_estimators"))
        shares = tree_shares([p[4] for p in parts.parts], T)
        seeds = np.random.SeedSequence(self._seed()).generate_state(len(parts.parts))
        tasks = [dask.delayed(_tasks.forest_part, pure=True)(
                     name, {**params, "n_estimators": int(k), "random_state": int(s)},
                     p[0], p[1], p[2])
                 for p, k, s in zip(parts.parts, shares, seeds) if k > 0]
        while len(tasks) > 1:
            merged = [dask.delayed(_tasks.merge_trees, pure=True)(name, params, tasks[i],
                                                                 tasks[i + 1])
                      for i in range(0, len(tasks) - 1, 2)]
            if len(tasks) % 2:
                merged.append(tasks[-1])
            tasks = merged
        trees = parts.client.compute(tasks[0]).result()
        parts.release()
        return trees

    def _finish(self, X, trees, prepare=None):
        local = self._local_class()(**self._params)
        if prepare is not None:
            prepare(local)
        local._call("fit_from_trees", [trees])
        local._finish_fit(_feature_names(X))
        self._local = local
        return self

    def predict(self, X):
        return self._map("predict", X)


class RandomForestClassifier(_Forest):
    """scikit-learn's RandomForestClassifier grown across the Dask workers."""

    _local_name = "RandomForestClassifier"

    def fit(self, X, y, sample_weight=None):
        dask, _, _ = _dask()
        y = as_dask_array(y, "y", ndim=(1,))
        per_block = [dask.delayed(_tasks.unique, pure=True)(b) for b in y.to_delayed().ravel()]
        classes = np.unique(np.concatenate(self._get_client().compute(per_block, sync=True)))
        y_enc = y.map_blocks(_tasks.encode_labels, classes, dtype=np.float64)
        trees = self._grow(X, y_enc, sample_weight)
        K = int(trees[5])  # the packed header's class count (forest_merge.h)
        if K != len(classes):
            raise ValueError(f"{len(classes) - K} of the {len(classes)} classes are only in "
                             f"partitions too small to grow a tree: repartition X or grow "
                             f"more trees")

        def labels(local):
            local.__dict__["_gsb_labels"] = (classes, None)
        return self._finish(X, trees, labels)

    def predict_proba(self, X):
        return self._map("predict_proba", X)


class RandomForestRegressor(_Forest):
    """scikit-learn's RandomForestRegressor grown across the Dask workers."""

    _local_name = "RandomForestRegressor"

    def fit(self, X, y, sample_weight=None):
        return self._finish(X, self._grow(X, y, sample_weight))
