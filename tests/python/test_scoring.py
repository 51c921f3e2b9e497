"""Model selection with scoring= strings: every built-in scorer of scikit-learn
(sklearn.metrics.get_scorer_names()) that applies to a gsb estimator, through
cross_val_score and GridSearchCV, against scikit-learn's estimator of the same name and
parameters on the same folds.

A scorer applies where scikit-learn's own estimator gets finite scores from it (f1 needs
two classes, neg_log_loss needs predict_proba, which SVC(probability=False) lacks, ...);
where it does not, gsb must not produce numbers either.  The estimators reach the same
optimum, so the scores agree to the tolerances below (docs/PARITY.md).
"""
import warnings

import numpy as np
import pytest
import sklearn.cluster
import sklearn.linear_model
import sklearn.neighbors
import sklearn.svm
from sklearn.metrics import get_scorer, get_scorer_names
from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold, cross_val_score

import gsb.cluster
import gsb.linear_model
import gsb.neighbors
import gsb.svm

from conftest import blobs, synthetic_classification, synthetic_regression

# top_k_accuracy on two classes is 1 by definition, and scikit-learn says so
pytestmark = pytest.mark.filterwarnings("ignore:'k' \\(2\\) greater than or equal to")


def _family(name):
    module = get_scorer(name)._score_func.__module__
    if ".cluster." in module:
        return "clustering"
    if module.endswith("_regression"):
        return "regression"
    return "classification"


SCORERS = {f: [n for n in get_scorer_names() if _family(n) == f]
           for f in ("classification", "regression", "clustering")}


# ---- data: small, so the sweep stays fast ------------------------------------------------

def _binary():
    X, y = synthetic_classification(90, 4, 2, np.float64, seed=11, sep=1.0)
    return X, y


def _multiclass():
    # string labels: the scorers see gsb's decoded labels and classes_
    X, y = synthetic_classification(120, 4, 3, np.float64, seed=12, sep=1.2)
    return X, np.array(["ant", "bee", "cat"])[y]


def _regression():
    # y well above 0, so the log, Poisson and gamma scorers apply
    X, y = synthetic_regression(80, 4, np.float64, seed=13, noise=1.0)
    return X, y + 100.0


def _clusters():
    # overlapping blobs (scores below 1) whose optimum both libraries find from any seed
    X, y, _ = blobs(90, 3, 3, np.float64, seed=28, spread=2.0)
    return X, y


# (id, family, data, gsb class, scikit-learn class, params, tolerance, grid)
CASES = [
    ("logreg-binary", "classification", _binary, gsb.linear_model.LogisticRegression,
     sklearn.linear_model.LogisticRegression, {}, 1e-4, {"C": [0.1, 1.0]}),
    ("logreg-multiclass", "classification", _multiclass, gsb.linear_model.LogisticRegression,
     sklearn.linear_model.LogisticRegression, {}, 1e-4, {"C": [0.1, 1.0]}),
    ("knn-binary", "classification", _binary, gsb.neighbors.KNeighborsClassifier,
     sklearn.neighbors.KNeighborsClassifier, {}, 1e-9, {"n_neighbors": [3, 7]}),
    ("knn-multiclass", "classification", _multiclass, gsb.neighbors.KNeighborsClassifier,
     sklearn.neighbors.KNeighborsClassifier, {"weights": "distance"}, 1e-9,
     {"n_neighbors": [3, 7]}),
    # SMO and libsvm stop at the same tolerance from the optimum, not at the same point
    ("svc-binary", "classification", _binary, gsb.svm.SVC, sklearn.svm.SVC, {}, 2e-3,
     {"C": [0.5, 2.0]}),
    ("svc-multiclass", "classification", _multiclass, gsb.svm.SVC, sklearn.svm.SVC,
     {"kernel": "linear"}, 2e-3, {"C": [0.5, 2.0]}),
    ("linreg", "regression", _regression, gsb.linear_model.LinearRegression,
     sklearn.linear_model.LinearRegression, {}, 1e-7, {"fit_intercept": [True, False]}),
    ("ridge", "regression", _regression, gsb.linear_model.Ridge,
     sklearn.linear_model.Ridge, {}, 1e-7, {"alpha": [0.1, 10.0]}),
    ("knn-regressor", "regression", _regression, gsb.neighbors.KNeighborsRegressor,
     sklearn.neighbors.KNeighborsRegressor, {}, 1e-9, {"n_neighbors": [3, 7]}),
    ("svr", "regression", _regression, gsb.svm.SVR, sklearn.svm.SVR,
     {"kernel": "linear", "C": 10.0}, 2e-3, {"epsilon": [0.1, 1.0]}),
    ("kmeans", "clustering", _clusters, gsb.cluster.KMeans, sklearn.cluster.KMeans,
     {"n_clusters": 3, "n_init": 10, "random_state": 0}, 1e-9, {"n_clusters": [2, 3]}),
]
CASE_IDS = [c[0] for c in CASES]
_BY_ID = {c[0]: c for c in CASES}


def _cv(family):
    if family == "classification":
        return StratifiedKFold(3, shuffle=True, random_state=0)
    return KFold(3, shuffle=True, random_state=0)


def _quiet(fn, *args, **kwargs):
    """Scores as scikit-learn reports them: a scorer that fails gives NaN (its
    error_score) with a warning; the comparison, not the warning, is the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _compare(what, got, want, tol):
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    assert np.array_equal(np.isfinite(got), np.isfinite(want)), \
        f"{what}: gsb {got}, scikit-learn {want} (finite where scikit-learn is)"
    ok = np.isfinite(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=tol, atol=tol, err_msg=what)


SWEEP = [(case, scorer) for case in CASE_IDS for scorer in SCORERS[_BY_ID[case][1]]]


@pytest.mark.parametrize("case,scorer", SWEEP, ids=[f"{c}-{s}" for c, s in SWEEP])
def test_cross_val_score_every_scorer(case, scorer):
    _, family, data, gcls, scls, params, tol, _ = _BY_ID[case]
    X, y = data()
    want = _quiet(cross_val_score, scls(**params), X, y, scoring=scorer, cv=_cv(family))
    got = _quiet(cross_val_score, gcls(**params), X, y, scoring=scorer, cv=_cv(family))
    _compare(f"{case} {scorer}", got, want, tol)


def test_the_sweep_scores_what_users_ask_for():
    """The scorers the issue names give numbers (not NaN) for gsb estimators."""
    X, y = _binary()
    for scorer in ("accuracy", "f1", "roc_auc", "neg_log_loss", "average_precision",
                   "balanced_accuracy", "top_k_accuracy", "precision", "recall"):
        scores = cross_val_score(gsb.linear_model.LogisticRegression(), X, y,
                                 scoring=scorer, cv=_cv("classification"),
                                 error_score="raise")
        assert np.all(np.isfinite(scores)), scorer
    X, y = _multiclass()
    for scorer in ("roc_auc_ovr", "roc_auc_ovo_weighted", "f1_macro", "neg_log_loss"):
        scores = cross_val_score(gsb.linear_model.LogisticRegression(), X, y,
                                 scoring=scorer, cv=_cv("classification"),
                                 error_score="raise")
        assert np.all(np.isfinite(scores)), scorer
    X, y = _regression()
    for scorer in ("r2", "neg_mean_squared_error", "neg_mean_squared_log_error"):
        assert np.all(np.isfinite(cross_val_score(
            gsb.linear_model.Ridge(), X, y, scoring=scorer, error_score="raise"))), scorer
    X, y = _clusters()
    assert np.all(np.isfinite(cross_val_score(
        gsb.cluster.KMeans(n_clusters=3, random_state=0), X, y,
        scoring="adjusted_rand_score", error_score="raise")))


def _applicable(case):
    """The scorers of the case's family that scikit-learn's estimator scores finitely."""
    _, family, data, _, scls, params, _, _ = _BY_ID[case]
    X, y = data()
    return [s for s in SCORERS[family]
            if np.all(np.isfinite(_quiet(cross_val_score, scls(**params), X, y, scoring=s,
                                         cv=_cv(family))))]


@pytest.mark.parametrize("case", CASE_IDS)
def test_grid_search_every_scorer_at_once(case):
    """GridSearchCV with all the applicable scorers at once (scikit-learn's multi-metric
    path, which calls each response method once and caches it by name)."""
    _, family, data, gcls, scls, params, tol, grid = _BY_ID[case]
    X, y = data()
    scorers = _applicable(case)
    assert len(scorers) >= {"classification": 12, "regression": 10, "clustering": 9}[family]
    refit = {"classification": "accuracy", "regression": "r2",
             "clustering": "adjusted_rand_score"}[family]
    results = {}
    for side, cls in (("gsb", gcls), ("sklearn", scls)):
        search = GridSearchCV(cls(**params), grid, scoring=scorers, refit=refit,
                              cv=_cv(family), error_score="raise")
        results[side] = search.fit(X, y)
    g, s = results["gsb"], results["sklearn"]
    for scorer in scorers:
        _compare(f"{case} {scorer}", g.cv_results_[f"mean_test_{scorer}"],
                 s.cv_results_[f"mean_test_{scorer}"], tol)
    assert g.best_params_ == s.best_params_
    assert isinstance(g.best_estimator_, gcls)


def test_grid_search_roc_auc_picks_a_real_best():
    """The issue's example: GridSearchCV(..., scoring='roc_auc') picked a "best" C from
    all-NaN scores."""
    X, y = _binary()
    grid = {"C": [1e-4, 1e-2, 1.0]}
    g = GridSearchCV(gsb.linear_model.LogisticRegression(), grid, scoring="roc_auc",
                     error_score="raise").fit(X, y)
    s = GridSearchCV(sklearn.linear_model.LogisticRegression(), grid,
                     scoring="roc_auc").fit(X, y)
    assert np.all(np.isfinite(g.cv_results_["mean_test_score"]))
    np.testing.assert_allclose(g.cv_results_["mean_test_score"],
                               s.cv_results_["mean_test_score"], rtol=1e-4)
    assert g.best_params_ == s.best_params_
    np.testing.assert_allclose(g.best_score_, s.best_score_, rtol=1e-4)


def test_default_scoring_of_transformers():
    """scoring=None: the estimator's own score (PCA's average log-likelihood)."""
    from gsb.decomposition import PCA
    from sklearn.decomposition import PCA as SkPCA
    X, _ = _regression()
    grid = {"n_components": [1, 2, 3]}
    g = GridSearchCV(PCA(), grid, cv=KFold(3, shuffle=True, random_state=0)).fit(X)
    s = GridSearchCV(SkPCA(), grid, cv=KFold(3, shuffle=True, random_state=0)).fit(X)
    np.testing.assert_allclose(g.cv_results_["mean_test_score"],
                               s.cv_results_["mean_test_score"], rtol=1e-6)
    assert g.best_params_ == s.best_params_


def test_methods_carry_their_public_names():
    """The root of the NaN scores: scikit-learn looks methods up again by __name__."""
    from gsb._registry import ALL
    for name, cls in ALL.items():
        for attr in ("fit", "predict", "predict_proba", "predict_log_proba",
                     "decision_function", "transform", "inverse_transform",
                     "fit_transform", "fit_predict", "score", "score_samples",
                     "kneighbors", "get_covariance", "get_precision"):
            fn = getattr(cls, attr, None)
            if fn is None:
                continue
            assert fn.__name__ == attr, f"{name}.{attr}.__name__ == {fn.__name__!r}"
            if attr in vars(cls):  # generated for this class
                assert fn.__qualname__.endswith(f"{name}.{attr}"), fn.__qualname__
            if fn.__module__.startswith("gsb."):
                assert fn.__doc__, f"{name}.{attr} has no docstring"
