"""Parity of gsb.linear_model with sklearn.linear_model (LinearRegression, Ridge,
LogisticRegression).  Tolerances: docs/PARITY.md, "linear models"."""
import numpy as np
import pytest
import sklearn.linear_model as skl

import gsb.linear_model as gsl
from conftest import (DTYPE_IDS, DTYPES, assert_close, assert_same_array_type,
                      check_attr_names, check_attr_types, fitted_attrs, load, rng,
                      synthetic_classification, synthetic_regression, xfail)

EPS32 = float(np.finfo(np.float32).eps)


def _rel_err(a, ref):
    a, ref = np.asarray(a, np.float64), np.asarray(ref, np.float64)
    assert np.all(np.isfinite(a)), "NaN/inf"
    return float(np.max(np.abs(a - ref)) / max(np.max(np.abs(ref)), 1e-300))


def assert_as_accurate(g, s, truth, what, factor=10.0, floor=100 * EPS32):
    """float32 results: gsb's error against the float64 solution is at most `factor`
    times scikit-learn's own float32 error, or `floor` (relative to the result's scale).

    Both libraries solve in float32 and both are off the exact answer by the
    problem's conditioning times eps; comparing the two float32 answers directly
    would measure that noise, not parity."""
    eg, es = _rel_err(g, truth), _rel_err(s, truth)
    assert eg <= factor * es + floor, (f"{what}: gsb float32 error {eg:.3g} vs scikit-learn's "
                                       f"{es:.3g} (allowed {factor * es + floor:.3g})")


# ---- LinearRegression and Ridge ------------------------------------------------------

# float64: both solve the same least-squares problem exactly (QR / SVD / Cholesky of
# the normal equations); the solutions differ by ~cond(X)^2 eps <= 1e-11 on these
# data (cond(X) <= 250).
F64_COEF = 1e-9    # relative to max |coef|
F64_PRED = 1e-10   # relative to max |prediction|

REG_SOURCES = ["diabetes", (100, 5), (2000, 30), (5000, 50)]
REG_IDS = ["diabetes", "syn100x5", "syn2000x30", "syn5000x50"]


def _regression_data(source, dtype, n_targets=1):
    if source == "diabetes":
        X, y = load("diabetes", dtype)
        return X, y.astype(dtype)
    n, d = source
    return synthetic_regression(n, d, dtype, seed=n + d, n_targets=n_targets)


REGRESSORS = [
    ("LinearRegression", {}),
    ("LinearRegression", {"fit_intercept": False}),
    ("Ridge", {}),
    ("Ridge", {"alpha": 10.0, "solver": "svd"}),
    ("Ridge", {"alpha": 0.1, "fit_intercept": False}),
    ("Ridge", {"alpha": 3.0, "solver": "cholesky"}),
]
REGRESSOR_IDS = ["ols", "ols_noint", "ridge", "ridge_svd", "ridge_noint", "ridge_chol"]


def _compare_regressor(name, params, X, y, dtype, sample_weight=None):
    g = getattr(gsl, name)(**params).fit(X, y, sample_weight=sample_weight)
    s = getattr(skl, name)(**params).fit(X, y, sample_weight=sample_weight)
    Xte = X[::3] * 1.1
    gp, sp = g.predict(Xte), s.predict(Xte)
    assert_same_array_type(gp, sp, "predict")
    assert_same_array_type(g.coef_, s.coef_, "coef_")
    if dtype == np.float64:
        assert_close(g.coef_, s.coef_, rtol=0, scaled_atol=F64_COEF, what="coef_")
        assert_close(g.intercept_, s.intercept_, rtol=0,
                     atol=F64_COEF * float(np.max(np.abs(y))), what="intercept_")
        assert_close(gp, sp, rtol=0, scaled_atol=F64_PRED, what="predict")
        assert abs(g.score(X, y) - s.score(X, y)) <= 1e-10
    else:
        t = getattr(skl, name)(**params).fit(X.astype(np.float64), y.astype(np.float64),
                                             sample_weight=sample_weight)
        assert_as_accurate(g.coef_, s.coef_, t.coef_, "coef_")
        assert_as_accurate(gp, sp, t.predict(Xte.astype(np.float64)), "predict")
        assert abs(g.score(X, y) - s.score(X, y)) <= 1e-5
    if "singular_" in fitted_attrs(s):
        assert_close(g.singular_, s.singular_, rtol=0,
                     scaled_atol=1e-12 if dtype == np.float64 else 1e-5, what="singular_")
        assert g.rank_ == s.rank_
    return g, s


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("source", REG_SOURCES, ids=REG_IDS)
@pytest.mark.parametrize("name,params", REGRESSORS, ids=REGRESSOR_IDS)
def test_regressor(name, params, source, dtype):
    X, y = _regression_data(source, dtype)
    _compare_regressor(name, params, X, y, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name,params", REGRESSORS, ids=REGRESSOR_IDS)
def test_regressor_multi_target_and_weights(name, params, dtype):
    X, Y = synthetic_regression(400, 12, dtype, seed=5, n_targets=3)
    w = rng(6).uniform(0.2, 4.0, size=len(X))
    _compare_regressor(name, params, X, Y, dtype)
    _compare_regressor(name, params, X, Y[:, 1], dtype, sample_weight=w)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("n_targets", [1, 3])
def test_positive(n_targets, dtype):
    """positive=True: gsb solves exactly (active set); scikit-learn's LinearRegression
    uses scipy's nnls (exact) and Ridge uses L-BFGS-B, run here to tol=1e-12."""
    X, y = synthetic_regression(300, 8, dtype, seed=11, n_targets=n_targets)
    g = gsl.LinearRegression(positive=True).fit(X, y)
    s = skl.LinearRegression(positive=True).fit(X, y)
    tol = 1e-9 if dtype == np.float64 else 2e-4
    assert_close(g.coef_, s.coef_, rtol=0, scaled_atol=tol, what="LinearRegression coef_")
    assert np.all(g.coef_ >= 0)
    g = gsl.Ridge(positive=True).fit(X, y)
    s = skl.Ridge(positive=True, tol=1e-12).fit(X, y)
    tol = 1e-6 if dtype == np.float64 else 2e-4
    assert_close(g.coef_, s.coef_, rtol=0, scaled_atol=tol, what="Ridge coef_")
    assert_close(g.predict(X), s.predict(X), rtol=0, scaled_atol=tol, what="Ridge predict")
    assert np.all(g.coef_ >= 0)


def test_ridge_alpha_per_target_list():
    X, Y = synthetic_regression(300, 8, np.float64, seed=12, n_targets=3)
    alpha = [0.5, 5.0, 50.0]
    g = gsl.Ridge(alpha=alpha).fit(X, Y)
    s = skl.Ridge(alpha=alpha).fit(X, Y)
    assert_close(g.coef_, s.coef_, rtol=0, scaled_atol=F64_COEF, what="coef_")


def test_ridge_alpha_per_target_ndarray():
    X, Y = synthetic_regression(300, 8, np.float64, seed=12, n_targets=3)
    alpha = np.array([0.5, 5.0, 50.0])
    g = gsl.Ridge(alpha=alpha).fit(X, Y)
    s = skl.Ridge(alpha=alpha).fit(X, Y)
    assert_close(g.coef_, s.coef_, rtol=0, scaled_atol=F64_COEF, what="coef_")


def _scaled_columns(n, p, cond, seed):
    """float32 X (n x p) whose columns span `cond` in scale, and a 2-target y."""
    r = np.random.default_rng(seed)
    X = (r.normal(size=(n, p)) * np.logspace(0, -np.log10(cond), p)).astype(np.float32)
    Y = (X.astype(np.float64) @ r.normal(size=(p, 2)) + 0.01 * r.normal(size=(n, 2)))
    return X, Y.astype(np.float32)


def test_linreg_float32_normal_equations():
    """Well-conditioned float32 X (cond ~ 1e3) goes through the float64 normal
    equations (linear_gram.c): coef_ and singular_ are the exact solution of the
    float32 data rounded once to float32, where an SVD in float32 (scikit-learn's,
    or the fallback) is off by ~cond * eps32."""
    X, Y = _scaled_columns(3000, 12, 1e3, seed=31)
    g = gsl.LinearRegression(fit_intercept=False).fit(X, Y)
    X64, Y64 = X.astype(np.float64), Y.astype(np.float64)
    exact = np.linalg.lstsq(X64, Y64, rcond=None)[0].T
    assert g.coef_.dtype == np.float32 and g.rank_ == 12
    for t in range(2):  # rounding to float32 only, per coefficient
        np.testing.assert_allclose(g.coef_[t], exact[t].astype(np.float32), rtol=2 * EPS32, atol=0)
    np.testing.assert_allclose(g.singular_, np.linalg.svd(X64, compute_uv=False), rtol=2 * EPS32)
    s = skl.LinearRegression(fit_intercept=False).fit(X, Y)
    assert_as_accurate(g.coef_, s.coef_, exact, "coef_", factor=1.0, floor=0)


@pytest.mark.parametrize("cond", [1e6, "rank-deficient"])
def test_linreg_float32_svd_fallback(cond):
    """Ill-conditioned or rank-deficient float32 X keeps the SVD: rank_ as
    scikit-learn's, and coef_ as accurate."""
    X, Y = _scaled_columns(800, 10, 1e6 if cond == 1e6 else 10.0, seed=32)
    if cond == "rank-deficient":
        X[:, 3] = X[:, 1]
    g = gsl.LinearRegression().fit(X, Y)
    s = skl.LinearRegression().fit(X, Y)
    assert g.rank_ == s.rank_
    Xc, Yc = X.astype(np.float64) - X.mean(0), Y.astype(np.float64) - Y.mean(0)
    exact = np.linalg.lstsq(Xc, Yc, rcond=None)[0].T
    assert_as_accurate(g.coef_, s.coef_, exact, "coef_")


@pytest.mark.parametrize("name,params,dtype,n_targets", [
    ("LinearRegression", {}, np.float64, 1),
    ("LinearRegression", {}, np.float64, 2),
    ("LinearRegression", {}, np.float32, 1),
    ("LinearRegression", {}, np.float32, 2),
    ("LinearRegression", {"fit_intercept": False}, np.float32, 1),
    ("Ridge", {}, np.float64, 1),
    ("Ridge", {"solver": "svd"}, np.float32, 2),
])
def test_regressor_attributes(name, params, dtype, n_targets):
    """Same fitted attribute names, kinds, shapes and dtypes as scikit-learn."""
    X, y = synthetic_regression(120, 4, dtype, seed=13, n_targets=n_targets)
    g = getattr(gsl, name)(**params).fit(X, y)
    s = getattr(skl, name)(**params).fit(X, y)
    check_attr_names(g, s)
    check_attr_types(g, s, fitted_attrs(s))


# ---- LogisticRegression -----------------------------------------------------------------

# Both run L-BFGS on the same objective (mean log-loss + ||coef||^2 / (2 C n)).
# float64: they take the same iterations and agree to ~1e-9; with tol=1e-10 both
# reach the optimum and agree to 1e-6 (digits, the worst conditioned).
# float32: scikit-learn evaluates the loss in float32 and stops early: its float32
# answer is off its own float64 answer by up to 1e-3 (tol=1e-10) or ~1e-4 (default
# tol).  gsb's float32 fit reaches the float64 optimum to ~1e-7, so float32 results
# are compared with scikit-learn's float64 fit of the same (float32) data, within 1e-5.
LOGREG_F64 = 1e-6
LOGREG_F32_VS_SK64 = 1e-5

LOGREG_SOURCES = ["iris", "wine", "breast_cancer", "digits", (200, 5, 2), (2000, 20, 3),
                  (5000, 30, 5)]
LOGREG_IDS = ["iris", "wine", "breast_cancer", "digits", "syn200x5c2", "syn2000x20c3",
              "syn5000x30c5"]


def _classification_data(source, dtype):
    if isinstance(source, str):
        return load(source, dtype, standardize=True)
    n, d, k = source
    return synthetic_classification(n, d, k, dtype, seed=n + d + k)


def _compare_logreg(g, s, X, dtype, t=None):
    """coef_, intercept_, probabilities, decision function, predictions.

    t: for float32 data, scikit-learn's fit of the same data in float64 (the
    reference for values; s still gives the expected dtypes and shapes)."""
    ref = s if t is None else t
    tol = LOGREG_F64 if t is None else LOGREG_F32_VS_SK64
    Xte = X[::2]
    Xref = Xte if t is None else Xte.astype(np.float64)
    values = {
        "coef_": (g.coef_, s.coef_, ref.coef_),
        "intercept_": (g.intercept_, s.intercept_, ref.intercept_),
        "predict_proba": (g.predict_proba(Xte), s.predict_proba(Xte), ref.predict_proba(Xref)),
        "decision_function": (g.decision_function(Xte), s.decision_function(Xte),
                              ref.decision_function(Xref)),
    }
    for what, (gv, sv, rv) in values.items():
        assert_same_array_type(gv, sv, what)
        assert_close(gv, rv, rtol=0, scaled_atol=tol, what=what)
    glp, slp = g.predict_log_proba(Xte), s.predict_log_proba(Xte)
    assert_same_array_type(glp, slp, "predict_log_proba")
    # d log p / d score is at most 1 in size (2 for multinomial): the log-probability
    # may move by twice the decision function's tolerance, plus eps / p where a
    # probability near 0 was formed as 1 - (a probability near 1) in the data's
    # precision (scikit-learn does that too, for two classes)
    rp = values["predict_proba"][2]
    keep = rp > 1e-6
    atol = 2 * tol * np.max(np.abs(values["decision_function"][2])) + \
        4 * np.finfo(dtype).eps / rp[keep]
    assert_close(glp[keep], ref.predict_log_proba(Xref)[keep], rtol=0, atol=atol,
                 what="predict_log_proba")
    # predictions: equal wherever the reference's top two classes are not a near tie
    top2 = np.sort(rp, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 1e-4
    gpred, spred = g.predict(Xte), s.predict(Xte)
    assert_same_array_type(gpred, spred, "predict")
    np.testing.assert_array_equal(gpred[clear], ref.predict(Xref)[clear])


# scikit-learn's own predict_log_proba takes log(0) for saturated float32 probabilities
@pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning")
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("source", LOGREG_SOURCES, ids=LOGREG_IDS)
@pytest.mark.parametrize("params", [{"max_iter": 1000},
                                    {"C": 0.1, "fit_intercept": False, "max_iter": 1000}],
                         ids=["default", "C0.1_noint"])
def test_logistic_regression(params, source, dtype):
    X, y = _classification_data(source, dtype)
    g = gsl.LogisticRegression(**params).fit(X, y)
    s = skl.LogisticRegression(**params).fit(X, y)
    t = None
    if dtype == np.float32:
        t = skl.LogisticRegression(**params).fit(X.astype(np.float64), y)
    _compare_logreg(g, s, X, dtype, t)
    assert_same_array_type(g.classes_, s.classes_, "classes_")
    np.testing.assert_array_equal(g.classes_, s.classes_)
    assert abs(g.score(X, y) - s.score(X, y)) <= 2.0 / len(X)


@pytest.mark.parametrize("source", ["iris", "wine", "breast_cancer", "digits",
                                    (2000, 20, 3)],
                         ids=["iris", "wine", "breast_cancer", "digits", "syn2000x20c3"])
def test_logistic_regression_converged(source):
    """Run to the optimum (tol=1e-10): coefficients agree to 1e-6 (float64)."""
    X, y = _classification_data(source, np.float64)
    params = {"tol": 1e-10, "max_iter": 10000, "C": 0.1 if source == "digits" else 1.0}
    g = gsl.LogisticRegression(**params).fit(X, y)
    s = skl.LogisticRegression(**params).fit(X, y)
    _compare_logreg(g, s, X, np.float64)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_logistic_regression_weights(dtype):
    X, y = synthetic_classification(600, 6, 3, dtype, seed=21)
    w = rng(22).uniform(0.1, 3.0, size=len(X))
    for params, sw in (({"class_weight": "balanced"}, None), ({}, w),
                       ({"class_weight": {0: 1.0, 1: 3.0, 2: 0.5}}, w)):
        g = gsl.LogisticRegression(**params).fit(X, y, sample_weight=sw)
        s = skl.LogisticRegression(**params).fit(X, y, sample_weight=sw)
        t = None if dtype == np.float64 else \
            skl.LogisticRegression(**params).fit(X.astype(np.float64), y, sample_weight=sw)
        _compare_logreg(g, s, X, dtype, t)


def test_logistic_regression_continuous_labels_rejected():
    X, yi = synthetic_classification(60, 2, 3, np.float64, seed=25)
    y = np.array([-1.5, 0.25, 4.0])[yi]
    with pytest.raises(ValueError, match="Unknown label type"):
        skl.LogisticRegression().fit(X, y)
    with pytest.raises(ValueError, match="Unknown label type"):
        gsl.LogisticRegression().fit(X, y)


@pytest.mark.parametrize("labels", [
    np.array([3, 7, 11]), np.array([-1.0, 0.0, 4.0]), np.array(["cat", "dog", "emu"]),
    np.array([False, True]),
], ids=["int", "float", "str", "bool"])
def test_logistic_regression_labels(labels):
    """Any label type: classes_ and predict in the caller's labels and dtype."""
    X, yi = synthetic_classification(300, 4, len(labels), np.float64, seed=23)
    y = labels[yi]
    g = gsl.LogisticRegression().fit(X, y)
    s = skl.LogisticRegression().fit(X, y)
    assert_same_array_type(g.classes_, s.classes_, "classes_")
    np.testing.assert_array_equal(g.classes_, s.classes_)
    gp, sp = g.predict(X), s.predict(X)
    assert_same_array_type(gp, sp, "predict")
    np.testing.assert_array_equal(gp, sp)
    assert_close(g.predict_proba(X), s.predict_proba(X), rtol=0, scaled_atol=LOGREG_F64,
                 what="predict_proba")
    assert g.score(X, y) == s.score(X, y)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("n_classes", [2, 3])
def test_logistic_regression_attributes(n_classes, dtype):
    X, y = synthetic_classification(200, 4, n_classes, dtype, seed=24)
    g = gsl.LogisticRegression().fit(X, y)
    s = skl.LogisticRegression().fit(X, y)
    check_attr_names(g, s)
    check_attr_types(g, s, fitted_attrs(s))
