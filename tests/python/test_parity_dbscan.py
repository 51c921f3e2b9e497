"""Parity of gsb.cluster.DBSCAN with sklearn.cluster.DBSCAN, and of the neighbours
estimators' radius_neighbors, radius_neighbors_graph and kneighbors_graph.

DBSCAN's labels and core samples must be identical (docs/PARITY.md, "DBSCAN"): every
data set's eps is moved into a gap of its pairwise distances, so that no pair lies
within rounding of eps (1e-5 relative) and both libraries see the same
neighbourhoods.  The same for the radius queries."""
import gc
import os
import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import sklearn.cluster as skc
import sklearn.neighbors as skn
from sklearn.datasets import make_blobs, make_moons
from sklearn.metrics import pairwise_distances
from sklearn.utils._param_validation import InvalidParameterError

import gsb
import gsb.cluster as gsc
import gsb.neighbors as gsn
from conftest import DTYPE_IDS, DTYPES, run_with_shim

GAP = 1e-5  # no pair distance within this (relative) of eps


# ---- data -------------------------------------------------------------------------------

def _anisotropic(n, seed):
    X, _ = make_blobs(n, 2, centers=3, random_state=seed)
    return X @ np.array([[0.6, -0.64], [-0.41, 0.85]])


def _varied(n, seed):
    X, _ = make_blobs(n, 2, centers=3, cluster_std=[1.0, 2.5, 0.5], random_state=seed)
    return X


def _duplicates(n, seed):
    X, _ = make_blobs(n // 3, 3, centers=4, random_state=seed)
    return np.vstack([X, X[: n // 3], X[::2]])


DATASETS = {
    "blobs2d": (lambda n, s: make_blobs(n, 2, centers=4, cluster_std=0.6, random_state=s)[0],
                0.3),
    "blobs3d": (lambda n, s: make_blobs(n, 3, centers=4, random_state=s)[0], 0.7),
    "blobs10d": (lambda n, s: make_blobs(n, 10, centers=5, random_state=s)[0], 3.2),
    "moons": (lambda n, s: make_moons(n, noise=0.06, random_state=s)[0], 0.12),
    "anisotropic": (_anisotropic, 0.25),
    "varied": (_varied, 0.6),
    "duplicates": (_duplicates, 0.8),
}
METRICS = [("euclidean", {}), ("manhattan", {}), ("chebyshev", {}), ("cosine", {}),
           ("sqeuclidean", {}), ("minkowski", {"p": 3}), ("minkowski", {"p": 1})]
METRIC_IDS = ["euclidean", "manhattan", "chebyshev", "cosine", "sqeuclidean",
              "minkowski3", "minkowski1"]


def _safe_radius(X, metric, target, **kw):
    """A radius near target (its scale for the metric) with no pair distance within GAP."""
    D = np.unique(pairwise_distances(X.astype(np.float64), metric=metric, **kw))
    for r in target * np.linspace(1.0, 1.5, 51):
        i = np.searchsorted(D, r)
        lo = D[i - 1] if i > 0 else -np.inf
        hi = D[i] if i < len(D) else np.inf
        if r - lo > GAP * r and hi - r > GAP * r:
            return float(r)
    raise AssertionError(f"no gap near {target} for {metric}")


def _radius_for(X, metric, base, p=2):
    """The data set's eps in the metric's terms."""
    if metric == "cosine":
        return 0.02
    if metric == "sqeuclidean":
        return base * base
    if metric == "manhattan" or p == 1:
        return base * np.sqrt(X.shape[1])
    return base


def _fit_pair(params, X, sample_weight=None):
    g = gsc.DBSCAN(**params).fit(X, sample_weight=sample_weight)
    s = skc.DBSCAN(**params).fit(X, sample_weight=sample_weight)
    return g, s


def _assert_same_clustering(g, s):
    assert g.labels_.dtype == s.labels_.dtype and g.labels_.shape == s.labels_.shape
    np.testing.assert_array_equal(g.labels_, s.labels_)
    np.testing.assert_array_equal(g.core_sample_indices_, s.core_sample_indices_)
    assert g.core_sample_indices_.dtype == s.core_sample_indices_.dtype
    assert g.components_.dtype == s.components_.dtype
    np.testing.assert_array_equal(g.components_, s.components_)
    assert g.n_features_in_ == s.n_features_in_


# ---- DBSCAN parity ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("metric,kw", METRICS, ids=METRIC_IDS)
@pytest.mark.parametrize("name", sorted(DATASETS))
def test_dbscan_labels_and_core_samples(name, metric, kw, dtype):
    make, base = DATASETS[name]
    X = make(600, 3).astype(dtype)
    eps = _safe_radius(X, metric, _radius_for(X, metric, base, **kw), **kw)
    g, s = _fit_pair({"eps": eps, "min_samples": 5, "metric": metric, **kw}, X)
    _assert_same_clustering(g, s)
    assert len(s.core_sample_indices_) > 0  # not a trivial all-noise case


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_dbscan_sample_weight(dtype):
    X = make_blobs(500, 2, centers=4, cluster_std=0.8, random_state=5)[0].astype(dtype)
    rng = np.random.default_rng(5)
    eps = _safe_radius(X, "euclidean", 0.3)
    for w in (rng.integers(0, 4, size=len(X)).astype(float),      # zeros included
              rng.integers(-1, 5, size=len(X)).astype(float),     # negative ones too
              rng.uniform(0.1, 3.0, size=len(X)).round(3)):
        g, s = _fit_pair({"eps": eps, "min_samples": 6}, X, sample_weight=w)
        _assert_same_clustering(g, s)
    g, s = _fit_pair({"eps": eps, "min_samples": 4}, X, sample_weight=2)  # a scalar
    _assert_same_clustering(g, s)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_dbscan_precomputed(dtype):
    X = make_moons(300, noise=0.05, random_state=2)[0]
    D = pairwise_distances(X).astype(dtype)
    eps = _safe_radius(X, "euclidean", 0.12)
    g, s = _fit_pair({"eps": eps, "min_samples": 4, "metric": "precomputed"}, D)
    _assert_same_clustering(g, s)
    # asymmetric: scikit-learn follows row i from core sample i only
    A = D * np.where(np.random.default_rng(3).random(D.shape) < 0.3, 2.0, 1.0).astype(dtype)
    g, s = _fit_pair({"eps": eps, "min_samples": 4, "metric": "precomputed"}, A)
    _assert_same_clustering(g, s)


def test_dbscan_precomputed_float32_compares_in_float32():
    """numpy compares a float32 matrix with eps rounded to float32, so does gsb."""
    D = np.array([[0, 0.1, 0.3], [0.1, 0, 0.3], [0.3, 0.3, 0]], dtype=np.float32)
    g, s = _fit_pair({"eps": 0.1, "min_samples": 2, "metric": "precomputed"}, D)
    _assert_same_clustering(g, s)
    np.testing.assert_array_equal(g.labels_, [0, 0, -1])


def test_dbscan_all_noise_and_one_cluster():
    X = make_blobs(200, 2, random_state=0)[0]
    g, s = _fit_pair({"eps": 1e-4, "min_samples": 2}, X)
    _assert_same_clustering(g, s)
    assert (g.labels_ == -1).all() and g.components_.shape == (0, 2)
    g, s = _fit_pair({"eps": 100.0, "min_samples": 3}, X)
    _assert_same_clustering(g, s)
    assert (g.labels_ == 0).all()


def test_dbscan_bounded_memory_gives_the_same_labels():
    """A working_memory too small for the neighbour lists: every pass recomputes its
    neighbourhoods in pieces, with the same result."""
    import sklearn
    X = make_blobs(3000, 2, centers=6, random_state=1)[0]
    eps = _safe_radius(X[:1500], "euclidean", 0.25)
    params = {"eps": eps, "min_samples": 5}
    ref = gsc.DBSCAN(**params).fit(X)
    with sklearn.config_context(working_memory=0.01):
        small = gsc.DBSCAN(**params).fit(X)
    np.testing.assert_array_equal(small.labels_, ref.labels_)
    np.testing.assert_array_equal(small.core_sample_indices_, ref.core_sample_indices_)


def test_dbscan_fit_predict_and_feature_names():
    import pandas as pd
    X = make_blobs(300, 3, random_state=4)[0]
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    g = gsc.DBSCAN(eps=0.8)
    labels = g.fit_predict(df)
    np.testing.assert_array_equal(labels, skc.DBSCAN(eps=0.8).fit_predict(df))
    np.testing.assert_array_equal(g.feature_names_in_, ["a", "b", "c"])
    assert not hasattr(g, "predict")


def test_dbscan_bad_input():
    X = make_blobs(50, 2, random_state=0)[0]
    for params, exc, match in [
            ({"eps": 0}, InvalidParameterError, r"The 'eps' parameter of DBSCAN must be a float "
             r"in the range \(0.0, inf\). Got 0 instead."),
            ({"eps": -1.0}, InvalidParameterError, "Got -1.0 instead"),
            ({"min_samples": 0}, InvalidParameterError, r"The 'min_samples' parameter of DBSCAN "
             r"must be an int in the range \[1, inf\). Got 0 instead."),
            ({"metric": "foo"}, InvalidParameterError, "The 'metric' parameter of DBSCAN"),
            ({"metric": "cosine", "algorithm": "kd_tree"}, ValueError,
             r"Metric 'cosine' not valid"),
            ({"metric": lambda a, b: 0.0}, InvalidParameterError,
             "Callables are not supported by gsb")]:
        for est in (gsc.DBSCAN, skc.DBSCAN):
            if est is skc.DBSCAN and "metric" in params and callable(params["metric"]):
                continue  # scikit-learn runs it
            with pytest.raises(exc, match=match):
                est(**params).fit(X)
    Xn = X.copy()
    Xn[3, 1] = np.nan
    for est in (gsc.DBSCAN, skc.DBSCAN):
        with pytest.raises(ValueError, match="Input X contains NaN"):
            est().fit(Xn)
        with pytest.raises(ValueError, match="Precomputed matrix must be square. Input is a "
                           "50x2 matrix."):
            est(metric="precomputed").fit(np.abs(X))
        with pytest.raises(ValueError, match="Negative values in data passed to X."):
            est(metric="precomputed").fit(-np.abs(X[:2, :2]))
        with pytest.raises(ValueError, match="Sample weights must contain at least one "
                           "non-zero number."):
            est().fit(X, sample_weight=np.zeros(50))


def test_dbscan_minkowski_below_one_warns_as_sklearn():
    X = make_blobs(200, 2, random_state=0)[0]
    params = {"eps": _safe_radius(X, "minkowski", 0.8, p=0.5), "metric": "minkowski",
              "p": 0.5}
    with pytest.warns(UserWarning, match="Minkowski metrics are not distance metrics"):
        g = gsc.DBSCAN(**params).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        s = skc.DBSCAN(**params).fit(X)
    _assert_same_clustering(g, s)


def test_dbscan_pickle_and_saved_model(tmp_path, monkeypatch):
    monkeypatch.setenv("GSB_DATA_DIR", str(tmp_path))
    X = make_blobs(200, 2, random_state=0)[0]
    g = gsc.DBSCAN(eps=0.7).fit(X)
    back = pickle.loads(pickle.dumps(g))
    np.testing.assert_array_equal(back.labels_, g.labels_)
    g.save("dbscan-model")
    loaded = gsb.load("dbscan-model")
    np.testing.assert_array_equal(loaded.labels_, g.labels_)
    np.testing.assert_array_equal(loaded.components_, g.components_)
    gsb.delete_saved("dbscan-model")


def test_dbscan_remote_session_matches_embedded(tmp_path):
    import gsb.server
    X = make_blobs(400, 2, random_state=8)[0].astype(np.float32)
    eps = _safe_radius(X, "euclidean", 0.6)
    local = gsc.DBSCAN(eps=eps).fit(X)
    srv = gsb.server.start(listen=["tcp://127.0.0.1:0"], data_dir=tmp_path / "store",
                           device=os.environ.get("GSB_DEVICE", "cpu"), log_level="warn")
    try:
        gsb.connect(srv.url_of("tcp"))
        remote = gsc.DBSCAN(eps=eps).fit(X)
        np.testing.assert_array_equal(remote.labels_, local.labels_)
        np.testing.assert_array_equal(remote.core_sample_indices_, local.core_sample_indices_)
        del remote
    finally:
        gsb.connect(None)
        gc.collect()
        srv.stop()


def test_cuml_dbscan_through_the_shim():
    code = ("import numpy as np, cuml, gsb.cluster\n"
            "from cuml.cluster import DBSCAN\n"
            "X = np.r_[np.zeros((5, 2)), np.ones((5, 2)) * 10, [[50, 50]]].astype('float32')\n"
            "m = DBSCAN(eps=0.5, min_samples=3).fit(X)\n"
            "print(m.labels_.tolist(), isinstance(cuml.DBSCAN(), gsb.cluster.DBSCAN))\n")
    out = run_with_shim(code)
    assert out.returncode == 0, out.stderr
    assert "[0, 0, 0, 0, 0, 1, 1, 1, 1, 1, -1] True" in out.stdout


# ---- radius_neighbors, radius_neighbors_graph, kneighbors_graph -----------------------------

NN_METRICS = ["euclidean", "manhattan", "cosine", "minkowski"]


def _nn_pair(metric, X, radius):
    g = gsn.NearestNeighbors(radius=radius, metric=metric, n_neighbors=4).fit(X)
    s = skn.NearestNeighbors(radius=radius, metric=metric, n_neighbors=4).fit(X)
    return g, s


def _same_rows(g_rows, s_rows, sort):
    assert g_rows.dtype == s_rows.dtype == object and len(g_rows) == len(s_rows)
    for a, b in zip(g_rows, s_rows):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a if sort else np.sort(a), b if sort else np.sort(b))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("metric", NN_METRICS)
@pytest.mark.parametrize("d", [2, 12])
def test_radius_neighbors(metric, dtype, d):
    rng = np.random.default_rng(d)
    X = rng.normal(size=(400, d)).astype(dtype)
    Q = rng.normal(size=(60, d)).astype(dtype)
    base = 0.05 if metric == "cosine" else (0.4 if d == 2 else 3.2)
    radius = _safe_radius(np.vstack([X, Q]), metric, base)
    g, s = _nn_pair(metric, X, radius)
    for query in (Q, None):
        for sort in (False, True):
            gd, gi = g.radius_neighbors(query, sort_results=sort)
            sd, si = s.radius_neighbors(query, sort_results=sort)
            _same_rows(gi, si, sort)
            for a, b, ia, ib in zip(gd, sd, gi, si):
                order_a = np.argsort(ia) if not sort else slice(None)
                order_b = np.argsort(ib) if not sort else slice(None)
                np.testing.assert_allclose(a[order_a], b[order_b], rtol=1e-5, atol=1e-6)
        _same_rows(g.radius_neighbors(query, return_distance=False),
                   s.radius_neighbors(query, return_distance=False), False)
    # radius as an argument overrides the parameter
    r2 = _safe_radius(np.vstack([X, Q]), metric, 1.3 * base)
    _same_rows(g.radius_neighbors(Q, radius=r2)[1], s.radius_neighbors(Q, radius=r2)[1], False)


def _same_graph(a, b, exact=True):
    assert type(a) is type(b) and a.shape == b.shape and a.dtype == b.dtype
    a, b = sp.csr_array(a), sp.csr_array(b)
    a.sort_indices()
    b.sort_indices()
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_allclose(a.data, b.data, rtol=0 if exact else 1e-5, atol=0 if exact
                               else 1e-6)


@pytest.mark.parametrize("metric", NN_METRICS)
def test_radius_neighbors_graph(metric):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(300, 3))
    Q = rng.normal(size=(40, 3))
    radius = _safe_radius(np.vstack([X, Q]), metric, 0.05 if metric == "cosine" else 0.6)
    g, s = _nn_pair(metric, X, radius)
    for query in (Q, None):
        _same_graph(g.radius_neighbors_graph(query), s.radius_neighbors_graph(query))
        _same_graph(g.radius_neighbors_graph(query, mode="distance", sort_results=True),
                    s.radius_neighbors_graph(query, mode="distance", sort_results=True),
                    exact=False)


@pytest.mark.parametrize("name", ["NearestNeighbors", "KNeighborsClassifier",
                                  "KNeighborsRegressor"])
def test_kneighbors_graph(name):
    rng = np.random.default_rng(9)
    X = rng.normal(size=(200, 4))
    y = rng.integers(0, 3, size=200)
    Q = rng.normal(size=(30, 4))
    g = getattr(gsn, name)(n_neighbors=5).fit(X, y)
    s = getattr(skn, name)(n_neighbors=5).fit(X, y)
    for query in (Q, None):
        _same_graph(g.kneighbors_graph(query), s.kneighbors_graph(query))
        _same_graph(g.kneighbors_graph(query, n_neighbors=3, mode="distance"),
                    s.kneighbors_graph(query, n_neighbors=3, mode="distance"), exact=False)


def test_neighbors_graph_errors():
    X = np.random.default_rng(0).normal(size=(20, 2))
    g, s = _nn_pair("euclidean", X, 0.5)
    for est in (g, s):
        with pytest.raises(ValueError, match="return_distance must be True if sort_results "
                           "is True."):
            est.radius_neighbors(X, return_distance=False, sort_results=True)
        with pytest.raises(ValueError, match='Unsupported mode, must be one of "connectivity", '
                           'or "distance" but got "foo" instead'):
            est.radius_neighbors_graph(X, mode="foo")
        with pytest.raises(ValueError, match="Unsupported mode"):
            est.kneighbors_graph(X, mode="foo")
    assert not hasattr(gsn.KNeighborsClassifier(), "radius_neighbors")
