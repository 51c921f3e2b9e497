"""LogisticRegression's solver names: gsb runs L-BFGS for all of them (docs/PARITY.md).
With the L2 penalty (or none) 'newton-cg', 'newton-cholesky', 'sag' and 'saga' share
lbfgs's optimum, so gsb gives lbfgs's answer and scikit-learn's solvers converge to it;
'liblinear' also penalises the intercept, which gsb's objective then carries, so it
matches scikit-learn's liblinear.  scikit-learn's refusals come in its words."""
import warnings

import numpy as np
import pytest
import sklearn.linear_model as skl

import gsb.linear_model as gl
from conftest import assert_close, load, synthetic_classification

TIGHT = dict(tol=1e-10, max_iter=10000)


def _data(k):
    if k == "breast_cancer":
        return load(k, np.float64, standardize=True)
    return synthetic_classification(300, 5, k, np.float64, seed=11 + k, sep=1.0)


@pytest.mark.parametrize("solver", ["newton-cg", "newton-cholesky", "sag", "saga"])
@pytest.mark.parametrize("k", [2, 3], ids=["binary", "multinomial"])
def test_same_optimum(solver, k):
    X, y = _data(k)
    g = gl.LogisticRegression(solver=solver, C=0.7, **TIGHT).fit(X, y)
    lb = gl.LogisticRegression(C=0.7, **TIGHT).fit(X, y)
    np.testing.assert_array_equal(g.coef_, lb.coef_)  # the very same L-BFGS run
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sag/saga may stop at max_iter on unscaled data
        s = skl.LogisticRegression(solver=solver, C=0.7, **TIGHT).fit(X, y)
    assert_close(g.coef_, s.coef_, rtol=0, scaled_atol=1e-5, what="coef_")
    assert_close(g.intercept_, s.intercept_, rtol=0, scaled_atol=1e-5, what="intercept_")
    np.testing.assert_array_equal(g.predict(X), s.predict(X))


@pytest.mark.parametrize("params", [{}, {"C": 0.1}, {"intercept_scaling": 5.0},
                                    {"intercept_scaling": 0.2, "class_weight": "balanced"},
                                    {"dual": True}, {"fit_intercept": False}],
                         ids=["default", "C0.1", "scaling5", "scaling0.2_balanced", "dual",
                              "no_intercept"])
@pytest.mark.parametrize("source", ["breast_cancer", 2])
def test_liblinear(params, source):
    X, y = _data(source)
    sw = np.linspace(0.5, 1.5, len(y))
    g = gl.LogisticRegression(solver="liblinear", **TIGHT, **params).fit(X, y, sample_weight=sw)
    s = skl.LogisticRegression(solver="liblinear", **TIGHT, **params).fit(X, y,
                                                                         sample_weight=sw)
    # both stop within their tolerances of the one optimum (breast_cancer is the worse
    # conditioned: ~2e-6 apart)
    assert_close(g.coef_, s.coef_, rtol=0, scaled_atol=1e-5, what="coef_")
    assert_close(g.intercept_, s.intercept_, rtol=0, atol=1e-5, what="intercept_")
    assert np.shape(g.intercept_) == np.shape(s.intercept_)  # 0.0 without an intercept
    assert g.n_iter_.shape == s.n_iter_.shape == (1,)
    if not params or params == {"C": 0.1}:  # the intercept's penalty shows
        lb = gl.LogisticRegression(**TIGHT, **params).fit(X, y, sample_weight=sw)
        assert abs(lb.intercept_[0] - g.intercept_[0]) > 1e-4


@pytest.mark.parametrize("case", ["liblinear_multiclass", "liblinear_huge", "liblinear_none",
                                  "lbfgs_l1", "newton_dual"])
def test_refusals_in_sklearns_words(case):
    X, y = _data(2)
    X3, y3 = _data(3)
    Xh = X.copy()
    Xh[0, 0] = 1e31
    params, data = {
        "liblinear_multiclass": ({"solver": "liblinear"}, (X3, y3)),
        "liblinear_huge": ({"solver": "liblinear"}, (Xh, y)),
        # (penalty=None: C=np.inf does not reach the engine, whose JSON has no infinity)
        "liblinear_none": ({"solver": "liblinear", "penalty": None}, (X, y)),
        "lbfgs_l1": ({"l1_ratio": 1.0}, (X, y)),
        "newton_dual": ({"solver": "newton-cg", "dual": True}, (X, y)),
    }[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # penalty is deprecated
        with pytest.raises(ValueError) as s:
            skl.LogisticRegression(**params).fit(*data)
        with pytest.raises(ValueError) as g:
            gl.LogisticRegression(**params).fit(*data)
    assert str(g.value) == str(s.value)


def test_l1_with_liblinear_is_not_faked():
    # saga's l1 runs (OWL-QN, test_parity_enet.py); liblinear's penalises the intercept too
    X, y = _data(2)
    with pytest.raises(NotImplementedError, match="'l1' penalty with solver 'liblinear' "
                          "is not supported by gsb"):
        gl.LogisticRegression(solver="liblinear", penalty="l1").fit(X, y)
