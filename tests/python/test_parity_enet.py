"""Parity of gsb's coordinate-descent models with scikit-learn: Lasso, ElasticNet,
LassoCV, ElasticNetCV, and LogisticRegression with l1_ratio > 0 (solver='saga').
Tolerances: docs/PARITY.md, "L1 models".

With tol=1e-8 both libraries stop within 1e-8 ||y||^2 of the same optimum, so the
coefficients agree to 1e-4 relative (float64: far better; float32: scikit-learn
iterates in float32, gsb in double) and the zeros are the same.  Also: attribute
names and types, the solver forms against each other, errors in scikit-learn's
words, saving and loading, the server (bit-identical), the cuml shim's names."""
import contextlib
import gc
import os
import pickle

import numpy as np
import pytest
import sklearn.linear_model as skl
from sklearn.datasets import make_regression
from sklearn.exceptions import NotFittedError
from sklearn.utils._param_validation import InvalidParameterError

import gsb
import gsb.linear_model as gsl
import gsb.server
from conftest import (DTYPE_IDS, DTYPES, assert_same_run, check_attr_names, check_attr_types,
                      fitted_attrs, load, run_with_shim)

DEVICE = os.environ.get("GSB_DEVICE", "cpu")
COEF_RTOL = 1e-4  # the bound: relative to max |coef_|


def _data(source, dtype, n_targets=1):
    if source == "diabetes":
        X, y = load("diabetes", dtype)
        y = y.astype(dtype)
        if n_targets == 2:
            y = np.c_[y, 0.5 * y + 50 * X[:, 0]].astype(dtype)
        return X, y
    n, d = source
    X, y = make_regression(n, d, n_informative=min(10, d), n_targets=n_targets, noise=1.0,
                           random_state=n + d)
    return X.astype(dtype), y.astype(dtype)


SOURCES = ["diabetes", (200, 30), (50, 200)]
SOURCE_IDS = ["diabetes", "n>p", "n<p"]


def _rel(a, ref):
    a, ref = np.asarray(a, np.float64), np.asarray(ref, np.float64)
    assert np.all(np.isfinite(a)), "NaN/inf"
    return float(np.max(np.abs(a - ref)) / max(np.max(np.abs(ref)), 1e-300))


def assert_parity(g, s, what):
    """coef_ within COEF_RTOL of max |coef_|, the same zeros, intercept_ and predictions
    on the same scale."""
    err = _rel(g.coef_, s.coef_)
    assert err <= COEF_RTOL, f"{what}: coef_ relative error {err:.3g}"
    scale = float(np.max(np.abs(s.coef_)))
    # a coefficient within rounding of zero on one side may be exactly zero on the other
    small = np.abs(s.coef_) <= 1e-6 * scale
    assert np.array_equal((g.coef_ != 0) | small, (s.coef_ != 0) | small), \
        f"{what}: different supports"
    icpt = np.max(np.abs(np.asarray(g.intercept_, np.float64) - s.intercept_))
    assert icpt <= COEF_RTOL * max(scale, float(np.max(np.abs(s.intercept_))), 1.0), \
        f"{what}: intercept_ differs by {icpt:.3g}"


def _fit_both(name, params, X, y, sample_weight=None):
    g = getattr(gsl, name)(**params).fit(X, y, sample_weight=sample_weight)
    s = getattr(skl, name)(**params).fit(X, y, sample_weight=sample_weight)
    return g, s


# ---- Lasso and ElasticNet -----------------------------------------------------------------

MODELS = [
    ("Lasso", {"alpha": 0.1}),
    ("Lasso", {"alpha": 0.1, "positive": True}),
    ("Lasso", {"alpha": 1.0, "fit_intercept": False}),
    ("ElasticNet", {"alpha": 0.05, "l1_ratio": 0.3}),
    ("ElasticNet", {"alpha": 0.2, "l1_ratio": 0.8, "selection": "random", "random_state": 0}),
]
MODEL_IDS = ["lasso", "lasso_pos", "lasso_noint", "enet", "enet_random"]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("source", SOURCES, ids=SOURCE_IDS)
@pytest.mark.parametrize("name,params", MODELS, ids=MODEL_IDS)
def test_parity(name, params, source, dtype):
    X, y = _data(source, dtype)
    params = {**params, "tol": 1e-8, "max_iter": 100000}
    g, s = _fit_both(name, params, X, y)
    assert_parity(g, s, f"{name}{params}")
    check_attr_names(g, s)
    check_attr_types(g, s, ["coef_", "intercept_", "dual_gap_", "n_iter_", "n_features_in_"])
    Xte = X[::3] * 1.1
    assert _rel(g.predict(Xte), s.predict(Xte)) <= COEF_RTOL
    assert g.predict(Xte).dtype == s.predict(Xte).dtype
    assert abs(g.score(X, y) - s.score(X, y)) <= 1e-5


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_same_epochs_as_scikit_learn(dtype):
    """float64 and the default tol: the same iterations, so the same n_iter_ and gap."""
    X, y = _data("diabetes", np.float64)
    for params in ({"alpha": 0.1}, {"alpha": 0.01, "l1_ratio": 0.5},
                   {"alpha": 0.1, "precompute": True}):
        name = "ElasticNet" if "l1_ratio" in params else "Lasso"
        g, s = _fit_both(name, params, X, y)
        assert g.n_iter_ == s.n_iter_, params
        assert abs(g.dual_gap_ - s.dual_gap_) <= 1e-6 * abs(s.dual_gap_), params


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("source", ["diabetes", (50, 200)], ids=["diabetes", "n<p"])
def test_several_targets_and_weights(source, dtype):
    X, y = _data(source, dtype, n_targets=2)
    params = {"alpha": 0.1, "tol": 1e-8, "max_iter": 100000}
    g, s = _fit_both("Lasso", params, X, y)
    assert_parity(g, s, "two targets")
    assert isinstance(g.n_iter_, list) and len(g.n_iter_) == 2
    check_attr_types(g, s, ["coef_", "intercept_", "dual_gap_", "n_iter_"])
    sw = (np.arange(len(X)) % 4 + 0.5).astype(dtype)
    g, s = _fit_both("ElasticNet", {**params, "l1_ratio": 0.6}, X, y[:, 0], sample_weight=sw)
    assert_parity(g, s, "sample_weight")


def test_warm_start():
    X, y = _data((200, 30), np.float64)
    g = gsl.Lasso(alpha=0.5, warm_start=True, tol=1e-8).fit(X, y)
    s = skl.Lasso(alpha=0.5, warm_start=True, tol=1e-8).fit(X, y)
    g.set_params(alpha=0.2).fit(X, y)
    s.set_params(alpha=0.2).fit(X, y)
    assert_parity(g, s, "warm start")
    g.fit(X, y)  # from its own optimum: no epoch needed, as scikit-learn
    s.fit(X, y)
    assert g.n_iter_ == s.n_iter_ == 0


@pytest.mark.parametrize("form", [1, 2, 3], ids=["gram", "residual", "working_set"])
def test_every_form_reaches_the_optimum(form):
    """The engine's three solver forms (forced through the fit option _cd_form) against
    scikit-learn, on both shapes."""
    for source in [(200, 30), (50, 200)]:
        X, y = _data(source, np.float64)
        s = skl.ElasticNet(alpha=0.3, l1_ratio=0.7, tol=1e-10).fit(X, y)
        g = gsl.ElasticNet(alpha=0.3, l1_ratio=0.7, tol=1e-10)
        g._call("fit", [X, y], options={"_cd_form": form})
        g._finish_fit(None)
        assert_parity(g, s, f"form {form} {source}")


# ---- the CV estimators ----------------------------------------------------------------------

CV_MODELS = [
    ("LassoCV", {}),
    ("LassoCV", {"cv": 3, "alphas": [1.0, 0.1, 0.01, 0.3]}),
    ("LassoCV", {"positive": True, "precompute": True}),
    ("ElasticNetCV", {"l1_ratio": [0.2, 0.7, 1.0], "cv": 4, "alphas": 30}),
    ("ElasticNetCV", {"l1_ratio": 0.5, "eps": 1e-2}),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name,params", CV_MODELS,
                         ids=["lassocv", "lassocv_list", "lassocv_pos", "enetcv_grid", "enetcv"])
def test_cv_parity(name, params, dtype):
    X, y = _data("diabetes", dtype)
    g, s = _fit_both(name, params, X, y)
    assert g.alpha_ == pytest.approx(s.alpha_, rel=1e-6)
    assert getattr(g, "l1_ratio_", None) == getattr(s, "l1_ratio_", None)
    assert _rel(g.alphas_, s.alphas_) <= (1e-12 if dtype == np.float64 else 1e-6)
    assert _rel(g.mse_path_, s.mse_path_) <= (1e-8 if dtype == np.float64 else 1e-4)
    assert_parity(g, s, name)
    check_attr_names(g, s)
    check_attr_types(g, s, ["alpha_", "alphas_", "mse_path_", "coef_", "intercept_",
                            "dual_gap_", "n_iter_"])


def test_cv_weights_and_splitters():
    from sklearn.model_selection import GroupKFold, KFold
    X, y = _data((200, 30), np.float64)
    sw = np.arange(200) % 3 + 1.0
    g, s = _fit_both("LassoCV", {"cv": 3}, X, y, sample_weight=sw)
    assert g.alpha_ == pytest.approx(s.alpha_, rel=1e-9)
    assert _rel(g.mse_path_, s.mse_path_) <= 1e-8
    groups = np.arange(200) % 5
    for cv in (KFold(4, shuffle=True, random_state=0),
               list(GroupKFold(5).split(X, y, groups))):
        g, s = _fit_both("ElasticNetCV", {"cv": cv}, X, y)
        assert g.alpha_ == pytest.approx(s.alpha_, rel=1e-9)
        assert _rel(g.mse_path_, s.mse_path_) <= 1e-8


# ---- LogisticRegression with L1 and elastic-net penalties -----------------------------------

@pytest.mark.parametrize("params", [{"l1_ratio": 1.0, "C": 0.1}, {"l1_ratio": 0.5, "C": 1.0},
                                    {"penalty": "l1", "C": 0.5}],
                         ids=["l1", "elasticnet", "penalty_l1"])
@pytest.mark.parametrize("source", ["breast_cancer", "wine"], ids=["binary", "multinomial"])
def test_logistic_l1_parity(params, source):
    X, y = load(source, np.float64, standardize=True)
    params = {**params, "solver": "saga", "tol": 1e-8, "max_iter": 100000}
    with pytest.warns() if "penalty" in params else contextlib.nullcontext():
        s = skl.LogisticRegression(**params).fit(X, y)
    g = gsl.LogisticRegression(**params).fit(X, y)
    assert_parity(g, s, f"LogisticRegression{params}")
    assert np.array_equal(g.predict(X), s.predict(X))
    check_attr_types(g, s, ["coef_", "intercept_", "classes_", "n_iter_"])


def test_logistic_l1_errors():
    X, y = load("breast_cancer", np.float64, standardize=True)
    with pytest.raises(ValueError, match="Solver lbfgs supports only 'l2' or None penalties, "
                                         "got l1 penalty."):
        gsl.LogisticRegression(l1_ratio=1.0).fit(X, y)


# ---- errors -----------------------------------------------------------------------------------

def test_errors_in_scikit_learns_words():
    X, y = _data("diabetes", np.float64)
    with pytest.raises(InvalidParameterError, match=r"The 'alpha' parameter of Lasso must be "
                                                    r"a float in the range \[0.0, inf\). Got "
                                                    r"-1 instead."):
        gsl.Lasso(alpha=-1).fit(X, y)
    with pytest.raises(InvalidParameterError, match=r"The 'l1_ratio' parameter of ElasticNet "
                                                    r"must be a float in the range \[0.0, "
                                                    r"1.0\]. Got 1.5 instead."):
        gsl.ElasticNet(l1_ratio=1.5).fit(X, y)
    bad = X.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN."):
        gsl.Lasso().fit(bad, y)
    bad[3, 2] = np.inf
    with pytest.raises(ValueError, match="Input X contains infinity"):
        gsl.ElasticNet().fit(bad, y)
    with pytest.raises(ValueError, match="Found input variables with inconsistent numbers of "
                                         "samples"):
        gsl.Lasso().fit(X, y[:-1])
    with pytest.raises(NotFittedError):
        gsl.Lasso().predict(X)
    with pytest.raises(ValueError, match="For multi-task outputs, use MultiTaskLassoCV"):
        gsl.LassoCV().fit(X, np.c_[y, y])
    with pytest.raises(ValueError, match=r"alphas\[1\] == -1, must be >= 0.0."):
        gsl.LassoCV(alphas=[0.1, -1]).fit(X, y)
    with pytest.raises(ValueError, match="Automatic alpha grid generation is not supported"):
        gsl.ElasticNetCV(l1_ratio=0).fit(X, y)
    m = gsl.Lasso().fit(X, y)
    with pytest.raises(ValueError, match="X has 3 features, but Lasso is expecting 10 "
                                         "features as input."):
        m.predict(X[:, :3])


# ---- saving, pickling, the server, the shim ------------------------------------------------------

def test_save_load_pickle(tmp_path, monkeypatch):
    monkeypatch.setenv("GSB_DATA_DIR", str(tmp_path))
    X, y = _data((200, 30), np.float32)
    for m in (gsl.Lasso(alpha=0.3).fit(X, y), gsl.ElasticNetCV(cv=3).fit(X, y)):
        name = f"enet-{type(m).__name__}"
        m.save(name)
        back = gsb.load(name)
        assert type(back) is type(m)
        assert np.array_equal(back.predict(X), m.predict(X))
        again = pickle.loads(pickle.dumps(m))
        assert np.array_equal(again.predict(X), m.predict(X))
        assert np.array_equal(again.coef_, m.coef_)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gsbd")
    srv = gsb.server.start(listen=[f"unix://{tmp}/s.sock"], data_dir=tmp / "store",
                           device=DEVICE, log_level="warn")
    yield srv
    gsb.connect(None)
    gc.collect()
    srv.stop()


def _workload(X, y, yb):
    models = [gsl.Lasso(alpha=0.2).fit(X, y),
              gsl.ElasticNet(alpha=0.1, selection="random", random_state=3).fit(X, y),
              gsl.LassoCV(cv=3).fit(X, y),
              gsl.ElasticNetCV(l1_ratio=[0.3, 0.9], cv=3, alphas=10).fit(X, y),
              gsl.LogisticRegression(l1_ratio=0.7, solver="saga").fit(X, yb)]
    out = {}
    for m in models:
        for attr, value in fitted_attrs(m).items():
            out[f"{type(m).__name__}.{attr}"] = value
        out[f"{type(m).__name__}.predict"] = m.predict(X)
    return out


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_remote_bit_identical(server, dtype):
    X, y = _data((120, 40), dtype)
    yb = (y > np.median(y)).astype(np.float64)
    local = _workload(X, y, yb)
    gsb.connect(server.url_of("unix"))
    try:
        remote = _workload(X, y, yb)
    finally:
        gsb.connect(None)
    assert sorted(remote) == sorted(local)
    for key, value in local.items():
        r = remote[key]
        if hasattr(value, "toarray"):  # sparse_coef_
            r, value = r.toarray(), value.toarray()
        if isinstance(value, np.ndarray):
            assert_same_run(r, value, key)
        elif isinstance(value, float):
            assert type(r) is type(value), key
            assert_same_run(r, value, key)
        else:
            assert type(r) is type(value) and r == value, key


def test_cuml_and_proxy_names():
    out = run_with_shim(
        "import numpy as np, cuml, cuml_proxy\n"
        "from cuml.linear_model import Lasso, ElasticNet, LassoCV, ElasticNetCV\n"
        "from cuml_proxy import Lasso as PL, ElasticNet as PE\n"
        "from cuml_proxy.proxy import ProxyEstimator\n"
        "assert cuml.Lasso is Lasso and cuml.ElasticNet is ElasticNet\n"
        "assert PL is Lasso and PE is ElasticNet and cuml.LassoCV is LassoCV\n"
        "X = np.random.rand(100, 5); y = X @ np.arange(5.0)\n"
        "m = cuml.Lasso(alpha=0.01).fit(X, y)\n"
        "assert isinstance(m, ProxyEstimator)\n"
        "print(m.coef_.shape, isinstance(ElasticNet().fit(X, y).n_iter_, int))\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "(5,) True"
