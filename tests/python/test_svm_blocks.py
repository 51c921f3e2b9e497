"""The two-level SMO (solvers/smo_blocks.c) against scikit-learn's libsvm.

gsb takes it on a GPU backend for problems of 3000 rows or more; GSB_SVM_SOLVER=blocks
forces it on any backend (on the CPU through the twins of its GPU ops), which is how
CI exercises it.  It reaches libsvm's optimum to libsvm's tolerance (tol), not libsvm's
iterates: tolerances in docs/PARITY.md, "SVM: the two-level SMO"."""
import numpy as np
import pytest
import sklearn.svm as sks
from sklearn.datasets import make_classification, make_regression

import gsb.svm as gss


@pytest.fixture
def blocks(monkeypatch):
    monkeypatch.setenv("GSB_SVM_SOLVER", "blocks")


def _aligned(est, n):
    """dual_coef_ rows spread over the n training samples."""
    out = np.zeros((est.dual_coef_.shape[0], n))
    out[:, est.support_] = est.dual_coef_
    return out


def _check_svc(g, s, X, C, dual=True):
    """dual: compare dual_coef_ too (rbf: K of full rank, the dual optimum unique; a
    low-rank K (linear, poly) leaves many duals of one decision function)."""
    assert np.mean(g.predict(X) == s.predict(X)) >= 0.995
    gd, sd = g.decision_function(X), s.decision_function(X)
    if gd.ndim == 1:  # ovr-shaped multi-class values hold vote counts: compare binary only
        assert np.max(np.abs(gd - sd)) <= 1e-2 * max(1.0, np.max(np.abs(sd)))
    assert np.max(np.abs(g.intercept_ - s.intercept_)) <= 1e-2
    if not dual:
        return
    both = np.intersect1d(g.support_, s.support_).size
    assert max(g.support_.size, s.support_.size) - both <= 0.01 * s.support_.size + 2
    assert np.max(np.abs(_aligned(g, len(X)) - _aligned(s, len(X)))) <= 0.05 * C


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("params", [{}, {"C": 10.0, "gamma": 0.05},
                                    {"kernel": "poly", "degree": 2, "coef0": 1.0},
                                    {"kernel": "linear", "C": 0.1}],
                         ids=["rbf", "rbf_C10", "poly", "linear"])
def test_svc_blocks(blocks, params, dtype):
    X, y = make_classification(1500, 10, random_state=3)
    X = X.astype(dtype)
    g = gss.SVC(**params).fit(X, y)
    s = sks.SVC(**params).fit(X, y)
    _check_svc(g, s, X, params.get("C", 1.0), dual=params.get("kernel", "rbf") == "rbf")
    if params.get("kernel") == "linear":
        assert np.max(np.abs(g.coef_ - s.coef_)) <= 1e-2 * np.max(np.abs(s.coef_))


def test_svc_blocks_multiclass(blocks):
    X, y = make_classification(1200, 12, n_informative=6, n_classes=4, random_state=4)
    g = gss.SVC(decision_function_shape="ovo").fit(X, y)
    s = sks.SVC(decision_function_shape="ovo").fit(X, y)
    np.testing.assert_array_equal(g.n_support_.sum() > 0, True)
    _check_svc(g, s, X, 1.0)
    gd, sd = g.decision_function(X), s.decision_function(X)
    assert np.max(np.abs(gd - sd)) <= 1e-2 * max(1.0, np.max(np.abs(sd)))


def test_svr_blocks(blocks):
    X, y = make_regression(1200, 8, noise=10.0, random_state=5)
    y = (y - y.mean()) / y.std()
    g = gss.SVR(C=3.0).fit(X, y)
    s = sks.SVR(C=3.0).fit(X, y)
    assert np.max(np.abs(g.predict(X) - s.predict(X))) <= 1e-2 * np.max(np.abs(y))
    assert abs(g.intercept_[0] - s.intercept_[0]) <= 1e-2
    assert np.max(np.abs(_aligned(g, len(X)) - _aligned(s, len(X)))) <= 0.05 * 3.0


def test_svc_blocks_max_iter(blocks):
    """max_iter counts SMO steps, as libsvm's; reaching it warns as scikit-learn."""
    X, y = make_classification(1000, 8, random_state=6)
    with pytest.warns(Warning, match="max_iter=50"):
        g = gss.SVC(max_iter=50).fit(X, y)
    assert g.fit_status_ == 1
    assert g.n_iter_[0] == 50


def test_svc_large_default_solver():
    """3000 rows and more: the two-level SMO on a GPU, libsvm's on the CPU."""
    X, y = make_classification(4000, 16, random_state=7)
    g = gss.SVC().fit(X, y)
    s = sks.SVC().fit(X, y)
    _check_svc(g, s, X, 1.0)
