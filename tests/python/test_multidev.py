"""Multi-device sessions from Python (docs/MULTIGPU.md): gsb.set_config(device="cpu:N")
runs the multi-device fits (rows split across N ranks, statistics combined exactly)
on the CPU, so they are checked here against the one-device fit; with GSB_DEVICE=cuda
(tools/gpu-check) "cuda:all" is checked against "cuda" too."""
import os

import numpy as np
import pytest

import gsb
from gsb._registry import ALL

SETS = [("cpu:2", "cpu"), ("cpu:3", "cpu")]
if os.environ.get("GSB_DEVICE") == "cuda":
    SETS.append(("cuda:all", "cuda"))

CASES = [
    ("StandardScaler", {}, False),
    ("MinMaxScaler", {"feature_range": (-1, 2)}, False),
    ("LinearRegression", {}, True),
    ("Ridge", {"alpha": 2.0}, True),
    ("Lasso", {"alpha": 0.5}, True),
    ("ElasticNet", {"alpha": 0.3, "l1_ratio": 0.4, "positive": True}, True),
    ("PCA", {"n_components": 3}, False),
    ("TruncatedSVD", {"n_components": 3, "algorithm": "arpack"}, False),
    ("LogisticRegression", {"C": 0.5}, "labels"),
]


@pytest.fixture
def restore_device():
    before = gsb.get_config()["device"]
    yield
    gsb.set_config(device=before)


def _data(n=203, d=6, dtype=np.float64):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(n, d)) * np.arange(1, d + 1) + np.arange(d)
    y = X @ rng.normal(size=d) + 0.1 * rng.normal(size=n)
    return X.astype(dtype), y.astype(dtype)


def _fit(device, name, params, X, y):
    gsb.set_config(device=device)
    est = ALL[name](**params)
    return est.fit(X, y) if y is not None else est.fit(X)


def _attrs(est):
    return {k: v for k, v in vars(est).items() if k.endswith("_") and not k.startswith("_")}


@pytest.mark.filterwarnings("error::UserWarning")  # no "first device only" fallback
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("multi,one", SETS)
@pytest.mark.parametrize("name,params,supervised", CASES)
def test_multigpu_fit_parity(restore_device, name, params, supervised, multi, one, dtype):
    X, y = _data(dtype=dtype)
    if supervised == "labels":  # three classes, labels of numpy's choosing
        y = np.digitize(y, np.quantile(y, [0.3, 0.7])).astype(np.int64)
    a = _fit(multi, name, params, X, y if supervised else None)
    b = _fit(one, name, params, X, y if supervised else None)
    fa, fb = _attrs(a), _attrs(b)
    assert fa.keys() == fb.keys()
    rtol = 1e-6 if dtype == np.float64 else 1e-4
    if name == "LogisticRegression":  # L-BFGS's stopping tolerance shows rounding: the bar
        rtol = max(rtol, 1e-5)
    if dtype == np.float32:  # a float32 GPU loss may take one L-BFGS step more or less
        fa.pop("n_iter_", None)
        fb.pop("n_iter_", None)
    for k in fb:
        # sparse_coef_ (Lasso, ElasticNet) compared dense
        dense = [v.toarray() if hasattr(v, "toarray") else v for v in (fa[k], fb[k])]
        va, vb = np.asarray(dense[0]), np.asarray(dense[1])
        assert va.shape == vb.shape and va.dtype == vb.dtype, k
        if va.dtype.kind in "fc":
            np.testing.assert_allclose(va, vb, rtol=rtol, atol=rtol * max(1.0, np.max(np.abs(vb))),
                                       err_msg=k)
        else:
            np.testing.assert_array_equal(va, vb, err_msg=k)


@pytest.mark.filterwarnings("error::UserWarning")  # no "first device only" fallback
@pytest.mark.parametrize("multi,one", SETS)
def test_multigpu_kmeans_same_labels(restore_device, multi, one):
    X, _ = _data()
    params = {"n_clusters": 4, "init": X[:4].copy(), "n_init": 1}
    a = _fit(multi, "KMeans", params, X, None)
    b = _fit(one, "KMeans", params, X, None)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_allclose(a.cluster_centers_, b.cluster_centers_, rtol=1e-9)
    assert a.n_iter_ == b.n_iter_


KNN_PARAMS = [{"n_neighbors": 5}, {"n_neighbors": 3, "metric": "manhattan"},
              {"n_neighbors": 4, "metric": "cosine"}]


@pytest.mark.filterwarnings("error::UserWarning")  # no "first device only" fallback
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("multi,one", SETS)
@pytest.mark.parametrize("params", KNN_PARAMS)
def test_multigpu_kneighbors_parity(restore_device, params, multi, one, dtype):
    """The index split across the ranks, each rank's top k merged: the one-device
    neighbours exactly (indices), distances as the same kernel computes them."""
    X, _ = _data(dtype=dtype)
    Q = (X[:40] + 0.3 * np.random.default_rng(5).normal(size=(40, X.shape[1]))).astype(dtype)
    a = _fit(multi, "NearestNeighbors", params, X, None)
    b = _fit(one, "NearestNeighbors", params, X, None)
    rtol = 1e-9 if dtype == np.float64 else 1e-5
    for q, k in ((Q, 1), (Q, None), (Q, len(X)), (None, None), (None, len(X) - 1)):
        da, ia = a.kneighbors(q, n_neighbors=k)
        db, ib = b.kneighbors(q, n_neighbors=k)
        np.testing.assert_array_equal(ia, ib)
        assert da.dtype == db.dtype
        np.testing.assert_allclose(da, db, rtol=rtol, atol=rtol)
    a.fit(X[::2])  # refitted: the shards follow the new training rows
    b.fit(X[::2])
    np.testing.assert_array_equal(a.kneighbors(Q)[1], b.kneighbors(Q)[1])


@pytest.mark.filterwarnings("error::UserWarning")
@pytest.mark.parametrize("multi,one", SETS)
def test_multigpu_kneighbors_estimators(restore_device, multi, one):
    X, y = _data()
    labels = np.digitize(y, np.quantile(y, [0.3, 0.7])).astype(np.int64)
    Q = X[:50] + 0.2
    for weights in ("uniform", "distance"):
        a = _fit(multi, "KNeighborsClassifier", {"weights": weights}, X, labels)
        b = _fit(one, "KNeighborsClassifier", {"weights": weights}, X, labels)
        np.testing.assert_allclose(a.predict_proba(Q), b.predict_proba(Q), rtol=1e-9)
        np.testing.assert_array_equal(a.predict(Q), b.predict(Q))
        assert a.score(X, labels) == b.score(X, labels)
        a = _fit(multi, "KNeighborsRegressor", {"weights": weights}, X, y)
        b = _fit(one, "KNeighborsRegressor", {"weights": weights}, X, y)
        np.testing.assert_allclose(a.predict(Q), b.predict(Q), rtol=1e-9)
    graph_a = _fit(multi, "NearestNeighbors", {}, X, None).kneighbors_graph(Q, mode="distance")
    graph_b = _fit(one, "NearestNeighbors", {}, X, None).kneighbors_graph(Q, mode="distance")
    np.testing.assert_allclose(graph_a.toarray(), graph_b.toarray(), rtol=1e-9)


def test_multigpu_radius_neighbors_first_device(restore_device):
    """radius_neighbors is not split: it searches on the first device, said once."""
    X, _ = _data()
    a = _fit("cpu:2", "NearestNeighbors", {"radius": 3.0}, X, None)
    b = _fit("cpu", "NearestNeighbors", {"radius": 3.0}, X, None)
    with pytest.warns(UserWarning, match="radius_neighbors runs on the first device"):
        da, ia = a.radius_neighbors(X[:20])
    db, ib = b.radius_neighbors(X[:20])
    for u, v in zip(ia, ib):
        np.testing.assert_array_equal(u, v)


def test_multigpu_transform_and_predict(restore_device):
    X, y = _data()
    a = _fit("cpu:2", "Ridge", {}, X, y)
    b = _fit("cpu", "Ridge", {}, X, y)
    np.testing.assert_allclose(a.predict(X), b.predict(X), rtol=1e-9)
    gsb.set_config(device="cpu:2")
    Z = ALL["StandardScaler"]().fit_transform(X)
    np.testing.assert_allclose(Z.mean(axis=0), 0, atol=1e-12)


def test_multigpu_collective_counters(restore_device):
    """session info counts the fits' collectives (bench/multigpu.py reads them): Ridge
    gathers its Gram statistics once, (2 + q + q^2) float64 plus the header per rank."""
    from gsb._session import get_session

    X, y = _data()
    gsb.set_config(device="cpu:2")

    def counters():
        return get_session().info()["devices"]["collectives"]

    before = counters()
    ALL["Ridge"]().fit(X, y)
    after = counters()
    assert after["calls"] == before["calls"] + 1
    assert after["bytes"] - before["bytes"] >= 8 * (2 + 7 + 49)
    assert after["seconds"] >= before["seconds"]


def test_multigpu_fallback_warns(restore_device):
    X, _ = _data()
    gsb.set_config(device="cpu:2")
    with pytest.warns(UserWarning, match="first device"):
        km = ALL["KMeans"](n_clusters=3, n_init=1, random_state=0).fit(X)
    gsb.set_config(device="cpu")
    ref = ALL["KMeans"](n_clusters=3, n_init=1, random_state=0).fit(X)
    np.testing.assert_array_equal(km.labels_, ref.labels_)


def test_multigpu_device_strings(restore_device):
    for good in ("cpu:2", "cuda:all", "cuda:0,1", "cuda:1"):
        gsb.set_config(device=good)
        assert gsb.get_config()["device"] == good
    for bad in ("cuda:", "cpu:x", "gpu:1", "cuda:0,", "cuda:a"):
        with pytest.raises(ValueError, match="device must be one of"):
            gsb.set_config(device=bad)


@pytest.mark.filterwarnings("error::UserWarning")  # no "first device only" fallback
@pytest.mark.parametrize("multi,one", SETS)
@pytest.mark.parametrize("name", ["RandomForestClassifier", "RandomForestRegressor"])
def test_multigpu_forest_same_trees(restore_device, name, multi, one):
    X, y = _data()
    y = np.digitize(y, np.quantile(y, [0.3, 0.7])) if "Class" in name else np.round(3 * y)
    params = {"n_estimators": 15, "max_depth": 6, "random_state": 1, "oob_score": True}
    a = _fit(multi, name, params, X, y)
    b = _fit(one, name, params, X, y)
    np.testing.assert_array_equal(a.feature_importances_, b.feature_importances_)
    assert a.oob_score_ == b.oob_score_
    assert len(a.estimators_) == 15
    np.testing.assert_array_equal(a.apply(X), b.apply(X))
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
