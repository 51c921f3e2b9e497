#!/usr/bin/env python3
"""compare.py - gsb against scikit-learn, side by side in one run.

For each case, scikit-learn fits and predicts on random data of the case's
shape in this process (all cores), and bench_gsb (the C engine through its
public API, from host arrays: GPU times include the transfers) does the same
on the same arrays (written to a temporary directory, $GSB_BENCH_DATA).  Each time is the median of
REPEATS runs.  The ratio is sklearn / gsb: above 1 means gsb is faster.

    python3 bench/compare.py [--suite cpu|gpu|small] [--session local?device=cuda]
                             [--json results.json]

--json also writes the table as JSON, which bench/plot.py draws (it reads these
printed tables too).

Suites: cpu (sizes for a laptop CPU), gpu (the sizes and targets of the CUDA
issue: KMeans 1M x 64 k=100, PCA/LinearRegression/Ridge/Lasso 1M x 256, ...),
small (5000 x 20, where device=auto must stay within 1.2x of scikit-learn).
A case's params may be a function of the data (DBSCAN's eps); estimators in
REPORT_MEMORY also report gsb's peak memory (host RSS, GPU pool growth).
UMAP's reference is umap-learn (not part of scikit-learn; tools/install-python.sh
installs it).

dtypes: a gpu-suite case runs in float32 unless it names its own dtypes (the issue's
float64 rows); cpu and small cases run in float32 and float64.  --dtypes narrows that.
A case may also give both sides the same initial centres (KMeans init=array) and
check that both ran the same number of iterations (n_iter_): a row whose sides
disagree is marked in the target column.

--scale F runs every case at F times its rows (a dry run of the gpu suite on a CPU:
--suite gpu --scale 0.001 --repeats 1); such rows are marked and not judged.

--profile runs gsb alone (no scikit-learn) with GSB_PROFILE=1 and prints where each
fit's time went (core/profile.h: phases, each after the device's queued work);
--wrap "CMD ARGS" runs bench_gsb under a tool, e.g. --wrap "ncu --log-file F
--print-summary per-kernel --launch-skip 500 --launch-count 200" for kernel times.
"""
import argparse
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import sklearn
from sklearn import (cluster, decomposition, ensemble, linear_model, manifold, neighbors,
                     preprocessing, svm)
from sklearn.datasets import make_classification

# the forests' parameters on both sides (scikit-learn on every core)
FOREST = {"n_estimators": 100, "n_jobs": -1, "random_state": 0}


def dbscan_params(X, neighbours=30):
    """eps for about `neighbours` neighbours a point (median over 500 rows), min_samples=10."""
    rows = np.random.default_rng(1).choice(len(X), min(500, len(X)), replace=False)
    dist = neighbors.NearestNeighbors(n_neighbors=neighbours).fit(X).kneighbors(X[rows])[0]
    return {"eps": float(np.median(dist[:, -1])), "min_samples": 10}


# estimators whose rows also report gsb's peak memory
REPORT_MEMORY = {"DBSCAN"}
_UMAP_WARM = []


def umap_learn(**params):
    """umap-learn's UMAP, the reference library of gsb's UMAP.  numba compiles its
    kernels on first use (~20 s): a small fit and transform first, outside any timing."""
    import umap
    if not _UMAP_WARM:
        X = np.random.default_rng(0).standard_normal((5000, 8)).astype(np.float32)
        umap.UMAP(n_epochs=5).fit(X).transform(X[:100])
        _UMAP_WARM.append(True)
    return umap.UMAP(**params)


# name, gsb estimator, gsb params, sklearn factory, n, d, target, n_query, method
# (the factory None: no reference run, gsb's time alone)
# (the GPU list adds the target ratio, and may add a dict of options, OPTIONS)
FULL = [
    ("StandardScaler 200k x 64", "StandardScaler", {}, preprocessing.StandardScaler,
     200_000, 64, "none", 0, "transform"),
    ("MinMaxScaler 200k x 64", "MinMaxScaler", {}, preprocessing.MinMaxScaler,
     200_000, 64, "none", 0, "transform"),
    ("LinearRegression 200k x 64", "LinearRegression", {}, linear_model.LinearRegression,
     200_000, 64, "reg", 0, "predict"),
    ("Ridge 200k x 64", "Ridge", {}, linear_model.Ridge, 200_000, 64, "reg", 0, "predict"),
    ("Lasso 200k x 64", "Lasso", {"alpha": 0.1}, linear_model.Lasso, 200_000, 64, "sparse", 0,
     "predict"),
    ("ElasticNet 200k x 64", "ElasticNet", {"alpha": 0.1}, linear_model.ElasticNet,
     200_000, 64, "sparse", 0, "predict"),
    ("LogisticRegression 100k x 32", "LogisticRegression", {},
     linear_model.LogisticRegression, 100_000, 32, "bin", 0, "predict"),
    ("PCA(16) 100k x 128 full", "PCA", {"n_components": 16, "svd_solver": "full"},
     decomposition.PCA, 100_000, 128, "none", 0, "transform"),
    ("PCA(16) 100k x 128 randomized", "PCA",
     {"n_components": 16, "svd_solver": "randomized", "random_state": 0},
     decomposition.PCA, 100_000, 128, "none", 0, "transform"),
    ("TruncatedSVD(16) 100k x 128", "TruncatedSVD", {"n_components": 16, "random_state": 0},
     decomposition.TruncatedSVD, 100_000, 128, "none", 0, "transform"),
    ("KMeans(20) 100k x 32, 20 it", "KMeans",
     {"n_clusters": 20, "n_init": 1, "max_iter": 20, "tol": 0.0, "init": "random",
      "random_state": 0},
     cluster.KMeans, 100_000, 32, "none", 0, "predict"),
    ("KMeans++(20) 100k x 32, 20 it", "KMeans",
     {"n_clusters": 20, "n_init": 1, "max_iter": 20, "tol": 0.0, "random_state": 0},
     cluster.KMeans, 100_000, 32, "none", 0, "predict"),
    ("kNN k=10 50k x 32, 2k queries", "KNeighborsClassifier", {"n_neighbors": 10},
     neighbors.KNeighborsClassifier, 50_000, 32, "multi", 2000, "predict"),
    # the TSNE issue: the CPU backend no slower than scikit-learn (both Barnes-Hut)
    ("TSNE 10k x 50", "TSNE", {"random_state": 0}, manifold.TSNE, 10_000, 50, "none", 0,
     "none"),
    # the forest issue's CPU target: >= 2x scikit-learn with n_jobs=-1
    ("RandomForestClassifier 100k x 32, 100 trees, 10 classes", "RandomForestClassifier",
     FOREST, ensemble.RandomForestClassifier, 100_000, 32, "multi10", 0, "predict"),
    ("DBSCAN 50k x 2", "DBSCAN", dbscan_params, cluster.DBSCAN, 50_000, 2, "none", 0, "none"),
    # against umap-learn (its defaults: random_state=None, parallel SGD); transform:
    # 2000 of the training rows as new points
    ("UMAP 20k x 64", "UMAP", {}, umap_learn, 20_000, 64, "none", 2000, "transform"),
]
# (name, estimator, params, sklearn factory, n, d, target, n_query, method, target ratio
#  [, options]); the options:
OPTIONS = {
    "dtypes": "the dtypes the case runs in (default: the suite's)",
    "init": "'given': KMeans starts both sides from the same k rows of X (init=array)",
    "n_iter": "both sides must report this n_iter_ (else the target is MISSED)",
    "goal_on": "'fit + <method>': the target is on the sum of fit and method times",
    "repeats": "at most this many repeats on either side (a long case)",
}
GPU = [
    # the issue's Lloyd row: 20 iterations from the same given centres on both sides
    # (k rows of X), tol=0; both must report n_iter_ == 20
    ("KMeans(100) 1M x 64, 20 Lloyd it, given init", "KMeans",
     {"n_clusters": 100, "n_init": 1, "max_iter": 20, "tol": 0.0},
     cluster.KMeans, 1_000_000, 64, "none", 0, "predict", 60,
     {"init": "given", "n_iter": 20}),
    # the issue's k-means++ row, float64: scikit-learn's default init (greedy
    # k-means++), whose 100 sequential steps are most of its time at this size
    ("KMeans(100) 1M x 64, k-means++, 20 it", "KMeans",
     {"n_clusters": 100, "n_init": 1, "max_iter": 20, "tol": 0.0, "random_state": 0},
     cluster.KMeans, 1_000_000, 64, "none", 0, "predict", 100,
     {"dtypes": ("float64",), "n_iter": 20}),
    # The issue's 8.0 s for scikit-learn is its 'full' solver: the default
    # ('auto' -> covariance_eigh at this shape) takes ~0.56 s on the same
    # machine, 'full' ~14x that (15x at 200k x 256 on a 2-core VM).
    ("PCA(32) 1M x 256, svd_solver=full", "PCA", {"n_components": 32, "svd_solver": "full"},
     decomposition.PCA, 1_000_000, 256, "none", 0, "transform", 50),
    ("PCA(32) 1M x 256", "PCA", {"n_components": 32}, decomposition.PCA,
     1_000_000, 256, "none", 0, "transform", 10),
    ("LinearRegression 1M x 256", "LinearRegression", {}, linear_model.LinearRegression,
     1_000_000, 256, "reg", 0, "predict", 50, {"dtypes": ("float32", "float64")}),
    ("Ridge 1M x 256", "Ridge", {}, linear_model.Ridge, 1_000_000, 256, "reg", 0, "predict",
     20, {"dtypes": ("float32", "float64")}),
    # scikit-learn's default (precompute=False): coordinate descent over the
    # residual, a pass over X per epoch; gsb: one Gram matrix, then the
    # persistent coordinate-descent kernel
    ("Lasso 1M x 256", "Lasso", {"alpha": 0.1}, linear_model.Lasso, 1_000_000, 256, "sparse",
     0, "predict", 20),
    ("ElasticNet 1M x 256", "ElasticNet", {"alpha": 0.1}, linear_model.ElasticNet,
     1_000_000, 256, "sparse", 0, "predict", 20),
    # wide (20 informative features of 20000): gsb's working sets
    ("Lasso 2000 x 20000", "Lasso", {"alpha": 0.1}, linear_model.Lasso, 2000, 20_000,
     "sparse", 0, "predict", 5),
    ("ElasticNet 2000 x 20000", "ElasticNet", {"alpha": 0.1}, linear_model.ElasticNet,
     2000, 20_000, "sparse", 0, "predict", 5),
    ("LogisticRegression 1M x 64 (make_classification, max_iter=1000)", "LogisticRegression",
     {"max_iter": 1000}, linear_model.LogisticRegression, 1_000_000, 64, "clf", 0, "predict",
     20),
    # multinomial (softmax over 8 classes: the blobs' labels), the same one-pass loss
    ("LogisticRegression 8 classes 200k x 64 (max_iter=1000)", "LogisticRegression",
     {"max_iter": 1000}, linear_model.LogisticRegression, 200_000, 64, "multi", 0, "predict",
     None),
    # end to end: the fit (scikit-learn builds a tree, gsb uploads X) and the 10k queries
    ("kNN 200k x 64, 10k queries, k=10", "NearestNeighbors", {"n_neighbors": 10},
     neighbors.NearestNeighbors, 200_000, 64, "none", 10_000, "kneighbors", 50,
     {"dtypes": ("float64",), "goal_on": "fit + kneighbors"}),
    # SVC, rbf, on make_classification's defaults (2 informative features, 1% of the
    # labels flipped: many support vectors).  scikit-learn (libsvm, one thread) takes
    # ~13 s at 20k on the issue's machine and grows ~n^2.
    ("SVC(rbf) 20k x 32 (make_classification)", "SVC", {}, svm.SVC, 20_000, 32, "clf", 0,
     "predict", 30),
    # one-vs-one over 10 classes: 45 pairs of ~4k rows
    ("SVC(rbf) 10 classes (OvO) 20k x 32", "SVC", {}, svm.SVC, 20_000, 32, "multi10", 0,
     "predict", None),
    # scikit-learn would take minutes (~25x its 20k time, n^2): gsb alone, no target
    ("SVC(rbf) 100k x 32 (make_classification)", "SVC", {}, None, 100_000, 32, "clf", 0,
     "predict", None, {"repeats": 1}),
    ("StandardScaler 1M x 256", "StandardScaler", {}, preprocessing.StandardScaler,
     1_000_000, 256, "none", 0, "transform", 5),
    # eps for about 30 neighbours a point; fit only (DBSCAN has no predict)
    ("DBSCAN 50k x 2", "DBSCAN", dbscan_params, cluster.DBSCAN, 50_000, 2, "none", 0, "none",
     10),
    ("DBSCAN 1M x 2", "DBSCAN", dbscan_params, cluster.DBSCAN, 1_000_000, 2, "none", 0, "none",
     None),
    ("DBSCAN 200k x 32", "DBSCAN", dbscan_params, cluster.DBSCAN, 200_000, 32, "none", 0,
     "none", None),
    ("MinMaxScaler 1M x 256", "MinMaxScaler", {}, preprocessing.MinMaxScaler,
     1_000_000, 256, "none", 0, "transform", 5),
    # TSNE end to end (kNN graph, affinities, PCA init, 1000 iterations); the GPU runs
    # FIt-SNE for method='barnes_hut' (docs/PARITY.md)
    ("TSNE 10k x 50", "TSNE", {"random_state": 0}, manifold.TSNE, 10_000, 50, "none", 0,
     "none", 50),
    # MNIST-shaped; scikit-learn would take tens of minutes: the target is gsb's own time
    # (under 5 s on an H100), scikit-learn is not run
    ("TSNE 70k x 784 (MNIST-shaped)", "TSNE", {"random_state": 0}, None, 70_000, 784,
     "none", 0, "none", "< 5000 ms"),
    # the forest issue: fit 100k x 32 (100 trees, 10 classes) >= 20x end to end; fit
    # 1M x 32 completes (no fit target) and predicting its 1M rows is >= 50x (read
    # in the pred ratio column: the targets column checks fits)
    ("RandomForestClassifier 100k x 32, 100 trees, 10 classes", "RandomForestClassifier",
     FOREST, ensemble.RandomForestClassifier, 100_000, 32, "multi10", 0, "predict", 20),
    ("RandomForestClassifier 1M x 32, 100 trees, 10 classes (predict goal 50x)",
     "RandomForestClassifier", FOREST, ensemble.RandomForestClassifier, 1_000_000, 32,
     "multi10", 0, "predict", None),
    ("RandomForestRegressor 100k x 32, 100 trees", "RandomForestRegressor", FOREST,
     ensemble.RandomForestRegressor, 100_000, 32, "reg", 0, "predict", 20),
    # the UMAP issue: MNIST's shape end to end >= 20x umap-learn; 1M x 64 completes
    # (umap-learn would take longer than a device session allows: gsb alone)
    ("UMAP 70k x 784 (MNIST-shaped)", "UMAP", {}, umap_learn, 70_000, 784, "none", 10_000,
     "transform", 20),
    ("UMAP 1M x 64", "UMAP", {}, None, 1_000_000, 64, "none", 10_000, "transform", None),
]

# Estimators timed only at the small size: their fits grow faster than n
# (kernel SVMs) or their large-size twin above already covers the op.
SMALL_ONLY = [
    ("SVC(rbf) binary", "SVC", {}, svm.SVC, 5000, 20, "bin", 0, "predict"),
    ("SVC(rbf) 8 classes", "SVC", {}, svm.SVC, 5000, 20, "multi", 0, "predict"),
    # Platt scaling: 5 cross-validation fits per pair of classes, then the sigmoid
    ("SVC(rbf, probability) binary", "SVC", {"probability": True, "random_state": 0}, svm.SVC,
     5000, 20, "bin", 0, "predict_proba"),
    ("SVR(rbf)", "SVR", {}, svm.SVR, 5000, 20, "reg", 0, "predict"),
    ("NearestNeighbors k=5", "NearestNeighbors", {}, neighbors.NearestNeighbors,
     5000, 20, "none", 1000, "kneighbors"),
    ("KNeighborsRegressor k=5", "KNeighborsRegressor", {}, neighbors.KNeighborsRegressor,
     5000, 20, "reg", 1000, "predict"),
    # the original project's figure at this size: 179 + 35 ms
    ("RandomForestClassifier 100 trees", "RandomForestClassifier", FOREST,
     ensemble.RandomForestClassifier, 500, 20, "bin", 0, "predict"),
    ("RandomForestRegressor 100 trees", "RandomForestRegressor", FOREST,
     ensemble.RandomForestRegressor, 500, 20, "reg", 0, "predict"),
]

# at 5000 x 20 (and SMALL_ONLY's sizes), gsb (device=auto) may take at most 1.2x
# scikit-learn's time
SMALL = [(name.split(" ")[0] + " 5000 x 20", est, params, factory, 5000, 20, target,
          min(nq, 1000), method, round(1 / 1.2, 2))
         for (name, est, params, factory, n, d, target, nq, method) in FULL
         if "randomized" not in name] + [
    (f"{name} {n} x {d}", est, params, factory, n, d, target, nq, method, round(1 / 1.2, 2))
    for (name, est, params, factory, n, d, target, nq, method) in SMALL_ONLY]


def make_data(n, d, target, dtype, rng):
    centers = 3 * rng.standard_normal((8, d))
    w = rng.standard_normal(d)
    labels = np.arange(n) % 8
    X = centers[labels] + rng.standard_normal((n, d))
    t = X @ w
    if target == "bin":
        y = (t > 0).astype(float)
    elif target == "multi":
        y = labels.astype(float)
    elif target == "clf":  # make_classification's defaults: 2 classes, 2 informative
        X, y = make_classification(n, d, random_state=int(rng.integers(1 << 31)))
        return X.astype(dtype), y.astype(dtype)
    elif target == "multi10":  # the forest issue's data: 10 overlapping classes
        X, y = make_classification(n, d, n_informative=d // 2, n_redundant=d // 8,
                                   n_classes=10, random_state=int(rng.integers(1 << 31)))
        return X.astype(dtype), y.astype(dtype)
    elif target == "sparse":
        # the L1 models' data: correlated features (AR(1), rho 0.6, instead of the
        # blobs, whose near rank-8 X takes coordinate descent hundreds of epochs)
        # and 20 informative ones
        z = rng.standard_normal((n, d))
        X = np.empty_like(z)
        X[:, 0] = z[:, 0]
        for j in range(1, d):
            X[:, j] = 0.6 * X[:, j - 1] + 0.8 * z[:, j]
        y = X[:, :20] @ w[:20] + 0.5 * rng.standard_normal(n)
    else:
        y = t + 0.1 * rng.standard_normal(n)
    return X.astype(dtype), y.astype(dtype)


def options(case):
    return case[10] if len(case) > 10 else {}


def fit_inputs(case, X, rng):
    """Arrays both sides get besides X and y: {"init": k rows of X} for a given init."""
    if options(case).get("init") != "given":
        return {}
    k = case[2]["n_clusters"]
    return {"init": X[np.sort(rng.choice(len(X), k, replace=False))]}


def time_sklearn(case, X, y, repeats, extra):
    """Median fit and method times (ms) and the last fit's n_iter_ (None without one)."""
    name, est, params, factory, n, d, target, nq, method = case[:9]
    if factory is None:  # not run (see the case)
        return None, None, None
    try:
        factory(**params)
    except ImportError:  # umap-learn not installed (a machine with no network): gsb alone
        return None, None, None
    Q = X[:nq] if nq else X
    fits, preds = [], []
    for _ in range(repeats):
        model = factory(**params, **extra)
        t0 = time.perf_counter()
        model.fit(X, y) if target != "none" else model.fit(X)
        fits.append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        if method != "none":
            getattr(model, method)(Q)
        preds.append((time.perf_counter() - t0) * 1e3)
    n_iter = getattr(model, "n_iter_", None)
    return (statistics.median(fits), statistics.median(preds),
            None if n_iter is None else int(np.max(n_iter)))


def time_gsb(case, X, y, repeats, bench, extra, wrap=(), profile=False):
    """bench_gsb on the very arrays scikit-learn got (GSB_BENCH_DATA); the fit
    inputs in extra go as DIR/NAME.bin.  profile: GSB_PROFILE's lines are printed;
    wrap: a command bench_gsb runs under."""
    name, est, params, factory, n, d, target, nq, method = case[:9]
    with tempfile.TemporaryDirectory(prefix="gsb-bench-") as tmp:
        X.tofile(os.path.join(tmp, "X.bin"))
        y.tofile(os.path.join(tmp, "y.bin"))
        for key, arr in extra.items():
            arr.tofile(os.path.join(tmp, f"{key}.bin"))
        env = dict(os.environ, GSB_BENCH_DATA=tmp)
        if profile and env.get("GSB_PROFILE", "0") in ("", "0"):
            env["GSB_PROFILE"] = "1"  # a level already set (2: more detail) is kept
        done = subprocess.run(
            [*wrap, bench, est, json.dumps(params), str(n), str(d),
             "f32" if X.dtype == np.float32 else "f64", target, str(nq), str(repeats), method],
            check=True, capture_output=True, text=True, env=env)
    if profile:
        print(f"## {name}, {X.dtype}")
        print("\n".join(line for line in done.stderr.splitlines() if "gsb profile" in line),
              flush=True)
    return json.loads(done.stdout)


def scaled(case, factor):
    """The case at factor times its rows and queries (at least 1000 rows), marked in
    its name, with no target: a dry run of a suite's cases on a small machine."""
    name, est, params, factory, n, d, target, nq, method = case[:9]
    n2 = max(int(n * factor), min(n, 1000))
    nq2 = min(max(int(nq * factor), 1), n2) if nq else 0
    return (f"{name} [rows x{factor:g}: {n2}]", est, params, factory, n2, d, target, nq2,
            method, None, options(case))


def case_dtypes(case, suite, wanted):
    """The dtypes a case runs in: its own (the issue's float64 rows) or its suite's,
    narrowed to --dtypes where given."""
    own = options(case).get("dtypes")
    default = ("float32",) if suite == "gpu" else ("float32", "float64")
    if wanted is None:
        return own or default
    return [t for t in own if t in wanted] if own else wanted


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", default="build/bench_gsb")
    ap.add_argument("--suite", default="cpu", choices=["cpu", "gpu", "small"])
    ap.add_argument("--quick", action="store_true", help="same as --suite small")
    ap.add_argument("--session", default=None,
                    help="gsb session URL for bench_gsb (default local?device=cpu)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sklearn-repeats", type=int, default=None)
    ap.add_argument("--dtypes", default=None,
                    help="comma-separated; default: float32 for the gpu suite (and the dtypes "
                         "its cases name), float32,float64 for the others")
    ap.add_argument("--cases", default=None,
                    help="only the cases whose name matches this regular expression (any case)")
    ap.add_argument("--scale", type=float, default=None, metavar="F",
                    help="run each case at F times its rows and queries (at least 1000 rows), "
                         "targets not judged: a quick check of a suite's cases, e.g. "
                         "--suite gpu --scale 0.001 on a CPU")
    ap.add_argument("--profile", action="store_true",
                    help="gsb alone, with GSB_PROFILE=1: print each call's phase times")
    ap.add_argument("--wrap", default="", metavar="CMD",
                    help="run bench_gsb under this command (a profiler)")
    ap.add_argument("--json", default=None, metavar="PATH",
                    help="also write the results as JSON (for bench/plot.py)")
    args = ap.parse_args()
    if args.session:
        os.environ["GSB_BENCH_SESSION"] = args.session
    rng = np.random.default_rng(0)
    suite = "small" if args.quick else args.suite
    cases = {"cpu": FULL + SMALL, "gpu": GPU, "small": SMALL}[suite]
    if args.cases:
        cases = [c for c in cases if re.search(args.cases, c[0], re.IGNORECASE)]
    for c in cases:
        assert set(options(c)) <= set(OPTIONS), f"{c[0]}: unknown options {options(c)}"
    if args.scale:
        cases = [scaled(c, args.scale) for c in cases]
    sk_repeats = args.sklearn_repeats or args.repeats
    meta = {"date": time.strftime("%Y-%m-%d"), "host": platform.node(),
            # the cores both sides may use (taskset), not the host's
            "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else os.cpu_count(), "machine": platform.processor() or platform.machine(),
            "sklearn": sklearn.__version__, "numpy": np.__version__, "suite": suite,
            "command": f"python3 bench/compare.py {' '.join(sys.argv[1:])}",
            "session": os.environ.get("GSB_BENCH_SESSION", "local?device=cpu")}
    print(f"# {meta['date']}  {meta['host']}  {meta['cores']} cores  {meta['machine']}  "
          f"scikit-learn {meta['sklearn']}  numpy {meta['numpy']}")
    print(f"# command: {meta['command']}")
    print(f"# gsb session: {meta['session']}")
    print(TABLE_HEAD)
    rows = []
    wanted = args.dtypes.split(",") if args.dtypes else None
    for dtype_name in ("float32", "float64"):
        dtype = np.dtype(dtype_name).type
        for case in cases:
            if dtype_name not in case_dtypes(case, suite, wanted):
                continue
            cap = options(case).get("repeats", max(sk_repeats, args.repeats))
            X, y = make_data(case[4], case[5], case[6], dtype, rng)
            if callable(case[2]):
                case = case[:2] + (case[2](X),) + case[3:]
            extra = fit_inputs(case, X, rng)
            sk = (None, None, None) if args.profile else time_sklearn(
                case, X, y, min(sk_repeats, cap), extra)
            r = time_gsb(case, X, y, min(args.repeats, cap), args.bench, extra,
                         shlex.split(args.wrap), args.profile)
            del X, y, extra
            rows.append(result_row(case, dtype_name, sk,
                                   (r["fit_ms"], r["predict_ms"], r.get("n_iter"))))
            if case[1] in REPORT_MEMORY:
                rows[-1]["gsb_peak_rss_mb"] = r.get("peak_rss_mb")
                rows[-1]["gsb_gpu_pool_mb"] = r.get("gpu_pool_mb")
            print(table_line(rows[-1]), flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)


TABLE_HEAD = ("| case | dtype | sklearn fit ms | gsb fit ms | fit ratio | sklearn pred ms "
              "| gsb pred ms | pred ratio | target |\n|---|---|---:|---:|---:|---:|---:|---:|---|")


def result_row(case, dtype_name, sk, g):
    """One case's figures (the JSON row; the table line is made from it) from
    scikit-learn's and gsb's (fit ms, method ms, n_iter).  A case without a
    scikit-learn factory has an absolute target on gsb's fit time ("< 5000 ms"); a
    case whose method is "none" times the fit alone."""
    (sk_fit, sk_pred, sk_iter), (g_fit, g_pred, g_iter) = sk, g
    goal = case[9] if len(case) > 9 else None
    opts = options(case)
    fit_only = case[8] == "none"
    met, note = None, None
    if sk_fit is None:
        limit = float(goal.split()[1]) if isinstance(goal, str) else None
        met = None if limit is None else g_fit < limit
    elif goal is not None:
        # speed-up targets (> 1) are on the fit, the main cost (or on fit + method,
        # end to end, where the case says so); the small-data rule (< 1: at most
        # 1.2x scikit-learn's time) holds for the fit and the prediction alike
        if opts.get("goal_on"):
            ratios = [(sk_fit + sk_pred) / (g_fit + g_pred)]
            note = f"on {opts['goal_on']}"
        else:
            ratios = [sk_fit / g_fit] + ([sk_pred / g_pred] if goal < 1 and not fit_only
                                         else [])
        met = min(ratios) >= goal
    if "n_iter" in opts and (sk_iter, g_iter) != (opts["n_iter"],) * 2:
        # unequal work: the ratio does not measure what the case says
        met, note = False, f"n_iter_: scikit-learn {sk_iter}, gsb {g_iter}"
    has_pred = sk_fit is not None and not fit_only
    return {"case": case[0], "dtype": dtype_name, "sklearn_fit_ms": sk_fit,
            "gsb_fit_ms": g_fit, "fit_ratio": None if sk_fit is None else sk_fit / g_fit,
            "sklearn_pred_ms": sk_pred if has_pred else None,
            "gsb_pred_ms": g_pred if not fit_only else None,
            "pred_ratio": sk_pred / g_pred if has_pred else None, "target": goal,
            "target_met": met, "note": note, "sklearn_n_iter": sk_iter, "gsb_n_iter": g_iter}


def table_line(r):
    def num(v, fmt):
        return "-" if v is None else format(v, fmt)
    target = ""
    if r["target"] is not None:
        goal = r["target"] if isinstance(r["target"], str) else f">= {r['target']}x"
        target = f"{goal}: {'met' if r['target_met'] else 'MISSED'}"
    if r.get("gsb_peak_rss_mb") is not None:
        gpu = r.get("gsb_gpu_pool_mb")
        gpu = f", GPU pool {gpu:.0f} MB" if gpu is not None else ""
        target += f" (gsb peak RSS {r['gsb_peak_rss_mb']:.0f} MB{gpu})"
    if r.get("note"):
        target = f"{target} ({r['note']})".lstrip()
    return (f"| {r['case']} | {r['dtype']} | {num(r['sklearn_fit_ms'], '.1f')} | "
            f"{num(r['gsb_fit_ms'], '.1f')} | {num(r['fit_ratio'], '.2f')}x | "
            f"{num(r['sklearn_pred_ms'], '.1f')} | {num(r['gsb_pred_ms'], '.1f')} | "
            f"{num(r['pred_ratio'], '.2f')}x | {target} |").replace("-x |", "- |")


if __name__ == "__main__":
    main()
