"""Shared helpers of the scikit-learn parity suite (tests/python/test_parity*.py).

Every test fits a gsb estimator and the scikit-learn estimator of the same name
with the same parameters on the same data and compares what comes out:
fitted attributes (names, shapes, dtypes, values), predictions, transforms,
probabilities, scores.  The tolerances are stated where they are used and
justified in docs/PARITY.md.

Data: the data sets scikit-learn ships (no download) and synthetic data drawn
from a seeded numpy Generator, at a few sizes, in float32 and float64.
The suite runs on gsb's CPU backend (or the device named by $GSB_DEVICE).
"""
import functools
import os
import subprocess
import sys
import warnings

# Before numpy loads: numpy's and scipy's own OpenBLAS single-threaded (the
# reference side's speed does not matter, and a busy-waiting BLAS pool on a shared
# 2-core CI machine makes it 50x slower); gsb's engine keeps 2 OpenMP threads so its
# parallel paths are what is tested; idle OpenMP threads sleep instead of spinning
# (scikit-learn's KMeans is 30x slower on a loaded machine otherwise).  All can be
# overridden from the environment.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import sklearn  # noqa: E402
from sklearn import datasets  # noqa: E402

import gsb  # noqa: E402

# The CPU backend (CI's); GSB_DEVICE=cuda runs the same suite on the GPU backend.
gsb.set_config(device=os.environ.get("GSB_DEVICE", "cpu"))

SKLEARN_VERSION = "1.9.1"
DTYPES = (np.float64, np.float32)
DTYPE_IDS = ("f64", "f32")


def pytest_report_header(config):
    return [f"gsb {gsb.__version__} (CPU backend), scikit-learn {sklearn.__version__}, "
            f"numpy {np.__version__}"]


def pytest_configure(config):
    if sklearn.__version__ != SKLEARN_VERSION:
        warnings.warn(f"the parity tolerances were set against scikit-learn "
                      f"{SKLEARN_VERSION}; this is {sklearn.__version__}")


# ---- data ------------------------------------------------------------------------------

_LOADERS = {
    "iris": datasets.load_iris,
    "digits": datasets.load_digits,
    "wine": datasets.load_wine,
    "breast_cancer": datasets.load_breast_cancer,
    "diabetes": datasets.load_diabetes,
}
REAL_SETS = tuple(_LOADERS)


@functools.lru_cache(maxsize=None)
def _load(name):
    X, y = _LOADERS[name](return_X_y=True)
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


def load(name, dtype=np.float64, standardize=False):
    """A shipped data set as (X, y): X in dtype (copied), y as shipped.

    standardize=True centres and scales X with numpy (not with either library) so
    iterative solvers converge well on both sides."""
    X, y = _load(name)
    X = X.astype(np.float64)
    if standardize:
        sd = X.std(axis=0)
        X = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    return np.ascontiguousarray(X, dtype=dtype), y.copy()


def rng(seed):
    return np.random.default_rng(seed)


def synthetic_regression(n, d, dtype, seed, n_targets=1, noise=0.1):
    """y = X w + b + noise with features of different scales and some correlation."""
    g = rng(seed)
    X = g.standard_normal((n, d)) @ (np.eye(d) + 0.3 * g.standard_normal((d, d)))
    X *= g.uniform(0.5, 5.0, size=d)
    X += g.uniform(-3, 3, size=d)
    w = g.standard_normal((d, n_targets))
    y = X @ w + g.uniform(-2, 2, size=n_targets) + noise * g.standard_normal((n, n_targets))
    y = y[:, 0] if n_targets == 1 else y
    return X.astype(dtype), y.astype(dtype)


def synthetic_classification(n, d, n_classes, dtype, seed, sep=1.5):
    """Gaussian classes around random means: overlapping, so the optimum is finite."""
    g = rng(seed)
    means = sep * g.standard_normal((n_classes, d))
    y = g.integers(0, n_classes, size=n)
    X = means[y] + g.standard_normal((n, d))
    return X.astype(dtype), y


def blobs(n, d, k, dtype, seed, spread=0.5):
    """k well separated Gaussian blobs and their true centres."""
    g = rng(seed)
    centers = g.uniform(-10, 10, size=(k, d))
    y = g.integers(0, k, size=n)
    X = centers[y] + spread * g.standard_normal((n, d))
    return X.astype(dtype), y, centers


def low_rank(n, d, rank, dtype, seed, gap=100.0, noise=0.01):
    """Data with `rank` strong directions, then a spectral gap of about `gap`."""
    g = rng(seed)
    U = np.linalg.qr(g.standard_normal((n, rank)))[0]
    V = np.linalg.qr(g.standard_normal((d, rank)))[0]
    s = np.geomspace(gap * 10, gap, rank)
    X = (U * s) @ V.T + noise * g.standard_normal((n, d)) + g.uniform(-1, 1, size=d)
    return X.astype(dtype)


# ---- comparisons ---------------------------------------------------------------------

def assert_close(actual, desired, rtol, atol=0.0, scaled_atol=0.0, what=""):
    """|actual - desired| <= atol + scaled_atol * max|desired| + rtol * |desired|, entrywise,
    and never NaN or inf on either side.

    atol may be an array broadcastable to the result (per-column bounds).
    scaled_atol is an absolute tolerance relative to the largest |desired| entry:
    entries that are tiny because of cancellation are judged against the scale of
    the whole result, not their own."""
    actual = np.asarray(actual)
    desired = np.asarray(desired)
    assert actual.shape == desired.shape, f"{what}: shape {actual.shape} != {desired.shape}"
    assert np.all(np.isfinite(actual)), f"{what}: gsb result has NaN/inf"
    assert np.all(np.isfinite(desired)), f"{what}: scikit-learn result has NaN/inf"
    a = actual.astype(np.float64)
    d = desired.astype(np.float64)
    scale = float(np.max(np.abs(d))) if d.size else 0.0
    bound = np.broadcast_to(np.asarray(atol, dtype=np.float64) + scaled_atol * scale
                            + rtol * np.abs(d), d.shape)
    err = np.abs(a - d)
    bad = err > bound
    if np.any(bad):
        flat = np.flatnonzero(bad)
        worst = flat[np.argsort((err.ravel()[flat] - bound.ravel()[flat]))[::-1][:5]]
        lines = [f"  at {tuple(int(j) for j in np.unravel_index(i, d.shape))}: "
                 f"gsb {a.ravel()[i]:.17g}, sklearn {d.ravel()[i]:.17g}, "
                 f"|diff| {err.ravel()[i]:.3g} > bound {bound.ravel()[i]:.3g}"
                 for i in worst]
        raise AssertionError(
            f"{what}: {bad.sum()} of {d.size} entries out of tolerance (rtol={rtol}, "
            f"atol={np.max(atol):.3g}, scaled_atol={scaled_atol}, max|desired|={scale:.3g}; "
            f"largest |diff| {err.max():.3g}):\n" + "\n".join(lines))


def assert_same_run(actual, desired, what=""):
    """A remote call's result against the same call made locally: bit-identical on the
    CPU backend; on the GPU within 1e-12 of the result's scale, as its atomic sums
    (histograms, reductions) add in a different order from one run to the next."""
    actual = np.asarray(actual)
    desired = np.asarray(desired)
    if os.environ.get("GSB_DEVICE", "cpu") == "cpu" or desired.dtype.kind not in "fc":
        np.testing.assert_array_equal(actual, desired, err_msg=what)
    else:
        assert actual.dtype == desired.dtype, f"{what}: dtype {actual.dtype} != {desired.dtype}"
        assert_close(actual, desired, rtol=1e-12, scaled_atol=1e-12, what=what)


def assert_same_array_type(actual, desired, what=""):
    """Same shape and dtype (numpy arrays) as scikit-learn's result."""
    assert isinstance(actual, np.ndarray), f"{what}: gsb gave {type(actual).__name__}"
    assert actual.shape == desired.shape, f"{what}: shape {actual.shape} != {desired.shape}"
    assert actual.dtype == desired.dtype, f"{what}: dtype {actual.dtype} != {desired.dtype}"


def fitted_attrs(est):
    """Public fitted attributes, as scikit-learn names them (trailing _), including
    properties (scikit-learn's SVC.n_support_, coef_ ...) that are available."""
    out = {}
    for name in dir(est):
        if not name.endswith("_") or name.startswith("_"):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out[name] = getattr(est, name)
        except AttributeError:
            continue
    return out


def scalar_dtype(v):
    """The numpy dtype a scalar attribute carries (Python float counts as float64)."""
    return np.asarray(v).dtype


def check_attr_types(g, s, names):
    """Each named attribute exists on both with the same kind, shape and dtype."""
    ga, sa = fitted_attrs(g), fitted_attrs(s)
    problems = []
    for name in names:
        if name not in ga:
            problems.append(f"{name}: missing on gsb")
            continue
        gv, sv = ga[name], sa[name]
        if isinstance(sv, np.ndarray):
            if not isinstance(gv, np.ndarray):
                problems.append(f"{name}: gsb {type(gv).__name__}, sklearn ndarray")
            elif gv.shape != sv.shape or gv.dtype != sv.dtype:
                problems.append(f"{name}: gsb {gv.dtype}{gv.shape}, sklearn {sv.dtype}{sv.shape}")
        elif sv is None:
            if gv is not None:
                problems.append(f"{name}: gsb {gv!r}, sklearn None")
        elif isinstance(sv, (bool, np.bool_)):
            if not isinstance(gv, (bool, np.bool_)):
                problems.append(f"{name}: gsb {type(gv).__name__}, sklearn bool")
        elif isinstance(sv, (int, float, np.number)):
            if isinstance(gv, (bool, np.bool_)) or not isinstance(gv, (int, float, np.number)):
                problems.append(f"{name}: gsb {type(gv).__name__}, sklearn number")
            elif scalar_dtype(gv).kind != scalar_dtype(sv).kind or (
                    scalar_dtype(sv).kind == "f" and scalar_dtype(gv) != scalar_dtype(sv)):
                problems.append(f"{name}: gsb scalar {scalar_dtype(gv)}, "
                                f"sklearn {scalar_dtype(sv)}")
        elif type(gv) is not type(sv):
            problems.append(f"{name}: gsb {type(gv).__name__}, sklearn {type(sv).__name__}")
    assert not problems, "; ".join(problems)


def check_attr_names(g, s):
    """gsb has every fitted attribute scikit-learn has, and no others."""
    ga, sa = set(fitted_attrs(g)), set(fitted_attrs(s))
    assert ga == sa, (f"missing on gsb: {sorted(sa - ga)}; "
                      f"only on gsb: {sorted(ga - sa)}")


def xfail(reason):
    """A known gsb deviation: the test must fail until it is fixed (strict)."""
    return pytest.mark.xfail(strict=True, reason=reason)


# ---- the cuml shim, and the original project's quick start ----------------

SHIM = os.path.join(os.path.dirname(__file__), "..", "..", "python", "cuml_shim")

# The original README's quick start, word for word (../shared/REFERENCE.md)
ORIGINAL_QUICK_START = """import numpy as np
import cuml
from cuml.svm import SVC
from cuml.preprocessing import StandardScaler
from cuml.decomposition import PCA
from cuml.linear_model import LogisticRegression
from cuml.cluster import KMeans
X = np.random.rand(1000, 20).astype("float32"); y = (X[:, 0] > 0.5).astype("float32")
X_s = StandardScaler().fit_transform(X)
svm = SVC(kernel="rbf", C=1.0); svm.fit(X_s, y); svm.predict(X_s[:5])
print(cuml.__version__)
from cuml_proxy.proxy import ProxyEstimator
sc = StandardScaler().fit(X)
sc.save("my_scaler"); svm.save("my_svm")
print(ProxyEstimator.list_saved())
sc2 = ProxyEstimator.load("my_scaler")
assert np.array_equal(sc2.transform(X), sc.transform(X))
assert isinstance(sc2, ProxyEstimator)
"""


def run_with_shim(code, **env):
    """Run code in a fresh interpreter that sees the cuml shim (installed or in-tree)."""
    path = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), SHIM) if p)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": path, **env}, timeout=120)
