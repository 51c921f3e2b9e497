"""Parity with scikit-learn across estimators: constructor parameters, the dtype rule,
fit_* shortcuts, pickling, and the original project's published iris scores.
Per-estimator value parity is in test_parity_<module>.py; tolerances in docs/PARITY.md."""
import pickle

import numpy as np
import pytest
import sklearn.cluster
import sklearn.decomposition
import sklearn.ensemble
import sklearn.linear_model
import sklearn.neighbors
import sklearn.preprocessing
import sklearn.svm
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline

import gsb
import gsb.cluster
import gsb.decomposition
import gsb.ensemble
import gsb.linear_model
import gsb.neighbors
import gsb.preprocessing
import gsb.svm
from conftest import (DTYPE_IDS, DTYPES, assert_close, assert_same_array_type, load,
                      synthetic_classification, synthetic_regression, xfail)

# (module, class, constructor parameters, target kind) for every estimator
ESTIMATORS = [
    ("preprocessing", "StandardScaler", {}, None),
    ("preprocessing", "MinMaxScaler", {}, None),
    ("linear_model", "LinearRegression", {}, "reg"),
    ("linear_model", "Ridge", {"alpha": 0.5}, "reg"),
    ("linear_model", "LogisticRegression", {"max_iter": 500}, "class"),
    ("linear_model", "Lasso", {"alpha": 0.1}, "reg"),
    ("linear_model", "ElasticNet", {"alpha": 0.1}, "reg"),
    ("linear_model", "LassoCV", {"cv": 3}, "reg"),
    ("linear_model", "ElasticNetCV", {"cv": 3}, "reg"),
    ("decomposition", "PCA", {"n_components": 3}, None),
    ("decomposition", "PCA", {"n_components": 3, "svd_solver": "randomized",
                              "random_state": 0}, None),
    ("decomposition", "TruncatedSVD", {"n_components": 3, "algorithm": "arpack"}, None),
    ("cluster", "KMeans", {"n_clusters": 3, "random_state": 0}, None),
    ("neighbors", "NearestNeighbors", {"n_neighbors": 4}, None),
    ("neighbors", "KNeighborsClassifier", {"n_neighbors": 4}, "class"),
    ("neighbors", "KNeighborsRegressor", {"n_neighbors": 4}, "reg"),
    ("svm", "SVC", {}, "class"),
    ("svm", "SVR", {}, "reg"),
    ("ensemble", "RandomForestClassifier", {"n_estimators": 5, "random_state": 0}, "class"),
    ("ensemble", "RandomForestRegressor", {"n_estimators": 5, "random_state": 0}, "reg"),
]
EST_IDS = [f"{c}{'_' + p['svd_solver'] if 'svd_solver' in p else ''}"
           for _, c, p, _ in ESTIMATORS]
ALL_NAMES = sorted({c for _, c, _, _ in ESTIMATORS} | {"LabelEncoder"})
MODULE_OF = {c: m for m, c, _, _ in ESTIMATORS} | {"LabelEncoder": "preprocessing"}


def _pair(module, name, params):
    g_cls = getattr(getattr(gsb, module), name)
    s_cls = getattr(getattr(sklearn, module), name)
    try:
        g = g_cls(**params)
    except NotImplementedError as e:
        pytest.skip(f"gsb.{module}.{name} is not implemented yet: {e}")
    return g, s_cls(**params)


def _xy(target, dtype, n=120, d=5):
    if target == "class":
        return synthetic_classification(n, d, 3, dtype, seed=61)
    X, y = synthetic_regression(n, d, dtype, seed=62)
    return X, (y if target == "reg" else None)


# ---- constructor ------------------------------------------------------------------------

@pytest.mark.parametrize("name", ALL_NAMES)
def test_constructor_parameters(name):
    """Same parameter names and defaults as scikit-learn's class of the same name."""
    module = MODULE_OF[name]
    g, s = _pair(module, name, {})
    gp, sp = g.get_params(deep=False), s.get_params(deep=False)
    assert list(gp) == list(sp) or sorted(gp) == sorted(sp), \
        f"only gsb: {sorted(set(gp) - set(sp))}, only sklearn: {sorted(set(sp) - set(gp))}"
    for key, value in sp.items():
        assert gp[key] == value and type(gp[key]) is type(value), \
            f"{name}({key}=...): gsb default {gp[key]!r}, scikit-learn {value!r}"


@pytest.mark.parametrize("module,name,params,target", ESTIMATORS, ids=EST_IDS)
def test_clone(module, name, params, target):
    from sklearn.base import clone
    g, s = _pair(module, name, params)
    c = clone(g)
    assert type(c) is type(g) and c.get_params() == g.get_params()
    X, y = _xy(target, np.float64)
    c.fit(X, y)
    assert not hasattr(g, "n_features_in_"), "clone shares fitted state with its original"


@pytest.mark.parametrize("module,name,first,second,target", [
    ("linear_model", "Ridge", {"alpha": 1.0}, {"alpha": 30.0}, "reg"),
    ("linear_model", "LogisticRegression", {"C": 1.0}, {"C": 0.01}, "class"),
    ("cluster", "KMeans", {"n_clusters": 3, "init": "random", "random_state": 0},
     {"n_clusters": 5}, None),
    ("neighbors", "KNeighborsClassifier", {"n_neighbors": 3}, {"n_neighbors": 9}, "class"),
    ("decomposition", "PCA", {"n_components": 2}, {"n_components": 4, "whiten": True}, None),
])
def test_set_params_then_refit(module, name, first, second, target):
    """A refit after set_params uses the new parameters, as scikit-learn's does."""
    X, y = _xy(target, np.float64)
    g, _ = _pair(module, name, first)
    g.fit(X, y)
    g.set_params(**second)
    g.fit(X, y)
    fresh, s = _pair(module, name, {**first, **second})
    fresh.fit(X, y)
    s.fit(X, y)
    for m, v in _outputs(fresh, X).items():
        np.testing.assert_array_equal(_outputs(g, X)[m], v, err_msg=m)
        assert _outputs(s, X)[m].shape == v.shape, m


def test_assert_close_rejects_nan_and_mismatch():
    """The comparison helper itself can fail: NaN on either side, or out of tolerance."""
    ref = np.array([1.0, 2.0, 3.0])
    assert_close(ref + 1e-12, ref, rtol=1e-10)
    for bad in (np.array([1.0, np.nan, 3.0]), np.array([1.0, 2.0, np.inf]), ref * 1.01):
        with pytest.raises(AssertionError):
            assert_close(bad, ref, rtol=1e-3)
        with pytest.raises(AssertionError):
            assert_close(ref, bad, rtol=1e-3)
    with pytest.raises(AssertionError):
        assert_close(ref[:2], ref, rtol=1)


# ---- the dtype rule ------------------------------------------------------------------------

METHODS = ("predict", "predict_proba", "predict_log_proba", "decision_function",
           "transform", "inverse_transform", "score_samples")


def _outputs(est, X):
    out = {}
    for m in METHODS:
        if not hasattr(est, m):
            continue
        arg = est.transform(X) if m == "inverse_transform" else X
        out[m] = getattr(est, m)(arg)
    if hasattr(est, "kneighbors"):
        out["kneighbors.indices"] = est.kneighbors(X)[1]
    return out


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("module,name,params,target", ESTIMATORS, ids=EST_IDS)
def test_dtype_rule(module, name, params, target, dtype):
    """float32 in gives float32 out wherever scikit-learn gives float32 (and float64
    stays float64): every method's result and every array fitted attribute has
    scikit-learn's dtype and shape.  (Known exceptions have their own xfail tests:
    KNeighborsRegressor with weights='distance' or integer y, kneighbors distances
    with algorithm='auto', scalar attributes.)"""
    g, s = _pair(module, name, params)
    X, y = _xy(target, dtype)
    g.fit(X, y)
    s.fit(X, y)
    go, so = _outputs(g, X), _outputs(s, X)
    assert sorted(go) == sorted(so), f"methods: gsb {sorted(go)}, sklearn {sorted(so)}"
    for m in so:
        assert_same_array_type(go[m], so[m], m)
        # finite where scikit-learn's is (a forest's log-probability of 0 is -inf on both)
        if go[m].dtype.kind == "f" and np.all(np.isfinite(so[m])):
            assert np.all(np.isfinite(go[m])), m
    for attr, sv in vars(s).items():
        if attr.endswith("_") and not attr.startswith("_") and isinstance(sv, np.ndarray) \
                and sv.dtype.kind == "f" and attr not in ("probA_", "probB_"):
            assert_same_array_type(getattr(g, attr), sv, attr)


KNR_Y_DTYPE = ("gsb KNeighborsRegressor.predict follows X's dtype; scikit-learn's "
               "follows y's (float64 X with float32 y gives float32 there)")


@pytest.mark.parametrize("module,name,params,target", [
    pytest.param(*e, id=i, marks=[xfail(KNR_Y_DTYPE)] if e[1] == "KNeighborsRegressor"
                 else []) for e, i in zip(ESTIMATORS, EST_IDS) if e[3] != "class"])
def test_float64_stays_float64_on_mixed_input(module, name, params, target):
    """float64 X, float32 y (regressors) or int X: results as scikit-learn's."""
    g, s = _pair(module, name, params)
    X, y = _xy(target, np.float64)
    Xi = np.round(X * 10).astype(np.int64)
    yf = None if y is None else y.astype(np.float32)
    g.fit(Xi, yf)
    s.fit(Xi, yf)
    go, so = _outputs(g, Xi), _outputs(s, Xi)
    for m in so:
        assert_same_array_type(go[m], so[m], m)


# ---- fit_transform / fit_predict on a fresh estimator -----------------------------------------

@pytest.mark.parametrize("module,name,params", [
    ("preprocessing", "StandardScaler", {}), ("preprocessing", "MinMaxScaler", {}),
    ("decomposition", "PCA", {"n_components": 2, "svd_solver": "full"}),
    ("decomposition", "TruncatedSVD", {"n_components": 2, "algorithm": "arpack"}),
])
def test_fit_transform_fresh(module, name, params):
    X, _ = load("wine")
    g, s = _pair(module, name, params)
    gt, st = g.fit_transform(X), s.fit_transform(X)
    assert_same_array_type(gt, st, "fit_transform")
    assert_close(gt, st, rtol=1e-9, scaled_atol=1e-9, what="fit_transform")
    assert_close(g.transform(X), st, rtol=1e-9, scaled_atol=1e-9, what="transform")


def test_kmeans_fit_predict_fit_transform_fresh():
    X, _ = load("iris")
    init = X[[0, 60, 120]]
    g, s = _pair("cluster", "KMeans", {"n_clusters": 3, "init": init, "n_init": 1})
    np.testing.assert_array_equal(g.fit_predict(X), s.fit_predict(X))
    g, s = _pair("cluster", "KMeans", {"n_clusters": 3, "init": init, "n_init": 1})
    assert_close(g.fit_transform(X), s.fit_transform(X), rtol=1e-12, what="fit_transform")


# ---- pickling keeps the fitted model -------------------------------------------------------

@pytest.mark.parametrize("module,name,params,target", ESTIMATORS, ids=EST_IDS)
def test_pickle_round_trip(module, name, params, target):
    g, _ = _pair(module, name, params)
    X, y = _xy(target, np.float64)
    g.fit(X, y)
    h = pickle.loads(pickle.dumps(g))
    for m, v in _outputs(g, X).items():
        np.testing.assert_array_equal(_outputs(h, X)[m], v, err_msg=m)


# ---- the original project's published iris numbers ------------------------------------------

# 5-fold cross_val_score (scikit-learn's default StratifiedKFold) of a StandardScaler
# + estimator pipeline on iris: the original project's published scores.  (Without
# the scaler scikit-learn 1.9.1 gives 0.9733, 0.9733 and 0.9667 for these; that
# is checked too, against scikit-learn's own result.)
PUBLISHED = [
    ("neighbors", "KNeighborsClassifier", {"n_neighbors": 5}, 0.9600),
    ("linear_model", "LogisticRegression", {"max_iter": 1000}, 0.9600),
    ("svm", "SVC", {"kernel": "rbf"}, 0.9667),
]


@pytest.mark.parametrize("module,name,params,published", PUBLISHED,
                         ids=[p[1] for p in PUBLISHED])
def test_iris_cross_val_score(module, name, params, published):
    X, y = load("iris")
    g, s = _pair(module, name, params)
    gs = cross_val_score(make_pipeline(gsb.preprocessing.StandardScaler(), g), X, y)
    ss = cross_val_score(make_pipeline(sklearn.preprocessing.StandardScaler(), s), X, y)
    np.testing.assert_array_equal(gs, ss)
    assert round(float(gs.mean()), 4) == published
    g, s = _pair(module, name, params)
    np.testing.assert_array_equal(cross_val_score(g, X, y), cross_val_score(s, X, y))


def test_kneighbors_iris_shuffled_kfold():
    """The other published protocol: KFold(5, shuffle=True, random_state=0) gives
    KNeighborsClassifier(5) 0.9600 and LogisticRegression 0.9533."""
    from sklearn.model_selection import KFold
    X, y = load("iris")
    cv = KFold(5, shuffle=True, random_state=0)
    for module, name, params, expected in [
            ("neighbors", "KNeighborsClassifier", {"n_neighbors": 5}, 0.9600),
            ("linear_model", "LogisticRegression", {"max_iter": 1000}, 0.9533)]:
        g, s = _pair(module, name, params)
        gs, ss = cross_val_score(g, X, y, cv=cv), cross_val_score(s, X, y, cv=cv)
        np.testing.assert_array_equal(gs, ss)
        assert round(float(gs.mean()), 4) == expected


def test_engine_describes_itself():
    info = gsb.info()
    assert "cpu" in info["backends_available"]
    names = {e["name"] for e in info["estimators"]}
    # svm is still being written: required once gsb.svm.SVC can be constructed
    required = {c for m, c, _, _ in ESTIMATORS if m != "svm"}
    try:
        gsb.svm.SVC()
        required |= {"SVC", "SVR"}
    except NotImplementedError:
        pass
    missing = required - names
    assert not missing, f"estimators the parity suite covers but the engine lacks: {missing}"
