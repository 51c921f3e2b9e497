"""gsb.dask's random forests (and cuml.dask.ensemble's names) on a LocalCluster: each
partition grows its share of the trees, the engine concatenates them (merge_trees)
into one ordinary gsb forest.  Not the single-process forest (each tree sees one
partition), so quality is compared: accuracy / R^2 on held-out rows within 0.02 of
the single-process forest's; and determinism, the merged tree count, predict equal to
to_local().predict, string labels, the errors."""
import numpy as np
import pytest

dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")
import dask.array as da  # noqa: E402
from dask.distributed import Client, LocalCluster  # noqa: E402
from sklearn.datasets import make_classification, make_regression  # noqa: E402
from sklearn.metrics import accuracy_score, r2_score  # noqa: E402

import gsb  # noqa: E402
from gsb._registry import ALL  # noqa: E402
import gsb.dask as gd  # noqa: E402
from gsb.dask.ensemble import tree_shares  # noqa: E402

CHUNK = 500  # rows per partition: 3 partitions of the 1500 training rows


@pytest.fixture(scope="module")
def client():
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=None, silence_logs=40)
    c = Client(cluster)
    yield c
    c.close()
    cluster.close()


def darr(a, chunk=CHUNK):
    return da.from_array(a, chunks=(chunk,) + a.shape[1:])


@pytest.fixture(scope="module")
def clf_data():
    X, y = make_classification(n_samples=2000, n_features=10, n_informative=6, n_classes=3,
                               random_state=0)
    return X[:1500], y[:1500], X[1500:], y[1500:]


@pytest.fixture(scope="module")
def reg_data():
    X, y = make_regression(n_samples=3500, n_features=8, n_informative=5, noise=10.0,
                           random_state=1)
    return X[:3000], y[:3000], X[3000:], y[3000:]


def test_tree_shares():
    assert tree_shares([500, 500, 500], 10).tolist() == [4, 3, 3]
    assert tree_shares([100, 300], 8).tolist() == [2, 6]
    assert tree_shares([1, 1, 1, 1], 2).tolist() == [1, 1, 0, 0]


@pytest.mark.parametrize("name", ["RandomForestClassifier", "RandomForestRegressor"])
def test_packed_layout(clf_data, name):
    # what the workers ship: exactly forest_merge.h's sections, each slot written (a slot
    # too many once held uninitialised memory, now and then a NaN that merge_trees refused)
    X, y, _, _ = clf_data
    est = ALL[name](n_estimators=3, max_depth=5, random_state=0).fit(X[:300], y[:300])
    trees = est._call("export_trees", [])["trees"]
    leaves = est._call("tree_info", [])["n_leaves"]
    magic, classify, T, N, L, K, F = trees[:7]
    assert (classify, T, N, L, F) == ("Class" in name, 3, (2 * leaves - 1).sum(), leaves.sum(), 10)
    assert len(trees) == 7 + classify * K + 3 * N + 4 * T + T * F + L * K
    assert np.isfinite(trees).all()


def test_classifier_quality_and_merge(client, clf_data):
    X, y, Xt, yt = clf_data
    params = {"n_estimators": 30, "random_state": 0}
    d = gd.RandomForestClassifier(client=client, **params).fit(darr(X), darr(y))
    one = ALL["RandomForestClassifier"](**params).fit(X, y)
    local = d.to_local()
    assert isinstance(local, ALL["RandomForestClassifier"])
    assert len(local.estimators_) == 30 and local.n_classes_ == 3
    assert local.feature_importances_.shape == (10,)
    np.testing.assert_allclose(local.feature_importances_.sum(), 1.0)
    acc_d = accuracy_score(yt, local.predict(Xt))
    acc_1 = accuracy_score(yt, one.predict(Xt))
    assert acc_d >= acc_1 - 0.02, (acc_d, acc_1)
    # predict is lazy and equals the merged model's
    np.testing.assert_array_equal(d.predict(darr(Xt, 200)).compute(), local.predict(Xt))
    np.testing.assert_allclose(d.predict_proba(darr(Xt, 200)).compute(),
                               local.predict_proba(Xt))


def test_regressor_quality(client, reg_data):
    X, y, Xt, yt = reg_data
    params = {"n_estimators": 30, "random_state": 2}
    # 2 partitions: a tree on half the rows (a smooth target needs rows more than labels)
    d = gd.RandomForestRegressor(client=client, **params).fit(darr(X, 1500), darr(y, 1500))
    one = ALL["RandomForestRegressor"](**params).fit(X, y)
    r2_d = r2_score(yt, d.to_local().predict(Xt))
    r2_1 = r2_score(yt, one.predict(Xt))
    assert r2_d >= r2_1 - 0.02, (r2_d, r2_1)
    assert len(d.to_local().estimators_) == 30
    np.testing.assert_array_equal(d.predict(darr(Xt, 200)).compute(), d.to_local().predict(Xt))


def test_deterministic(client, reg_data):
    X, y, Xt, _ = reg_data
    a = gd.RandomForestRegressor(client=client, n_estimators=7, random_state=5).fit(
        darr(X), darr(y))
    b = gd.RandomForestRegressor(client=client, n_estimators=7, random_state=5).fit(
        darr(X), darr(y))
    c = gd.RandomForestRegressor(client=client, n_estimators=7, random_state=6).fit(
        darr(X), darr(y))
    np.testing.assert_array_equal(a.to_local().predict(Xt), b.to_local().predict(Xt))
    assert not np.array_equal(a.to_local().predict(Xt), c.to_local().predict(Xt))


def test_string_labels_weights_and_store(client, clf_data, tmp_path, monkeypatch):
    X, y, Xt, _ = clf_data
    labels = np.array(["ant", "bee", "cat"])[y]
    w = np.linspace(0.5, 2.0, len(y))
    d = gd.RandomForestClassifier(client=client, n_estimators=5, max_depth=4,
                                  random_state=1).fit(darr(X), darr(labels), darr(w))
    local = d.to_local()
    assert local.classes_.tolist() == ["ant", "bee", "cat"]
    assert set(local.predict(Xt)) <= {"ant", "bee", "cat"}
    monkeypatch.setenv("GSB_DATA_DIR", str(tmp_path))
    local.save("rf_dask")
    back = gsb.load("rf_dask")
    np.testing.assert_array_equal(back.predict(Xt), local.predict(Xt))


def test_errors(client, clf_data):
    X, y, _, _ = clf_data
    with pytest.raises(NotImplementedError, match="oob_score"):
        gd.RandomForestClassifier(client=client, oob_score=True).fit(darr(X), darr(y))
    with pytest.raises(TypeError):
        gd.RandomForestClassifier(client=client, no_such_param=1)


def test_cuml_dask_names(client, reg_data):
    import cuml.dask.ensemble as cde
    X, y, Xt, _ = reg_data
    m = cde.RandomForestRegressor(client=client, n_estimators=4, random_state=0).fit(
        darr(X), darr(y))
    np.testing.assert_array_equal(m.get_combined_model().predict(Xt),
                                  m.predict(darr(Xt)).compute())
