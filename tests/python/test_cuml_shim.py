"""The cuml shim as cuML code uses it: the output_type parameter, set_global_output_type
and using_output_type (cuML's precedence: a global type wins over the estimator's, 'input'
mirrors the call's input, fitted attributes mirror fit's input), the errors for what needs
GPU arrays, scikit-learn's estimator checks on the shim's classes, and cuml.__version__
against gsbd's /health."""
import http.client
import importlib.util
import json
import pickle
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from conftest import SHIM

if importlib.util.find_spec("cuml_proxy") is None:
    sys.path.append(SHIM)  # the in-tree shim where it is not installed

import cuml  # noqa: E402
import gsb  # noqa: E402
import gsb.server  # noqa: E402
from cuml.cluster import KMeans  # noqa: E402
from cuml.decomposition import PCA  # noqa: E402
from cuml.linear_model import LinearRegression, LogisticRegression  # noqa: E402
from cuml.neighbors import NearestNeighbors  # noqa: E402
from cuml.preprocessing import LabelEncoder, StandardScaler  # noqa: E402
from test_estimator_checks import expected_failed_checks  # noqa: E402


@pytest.fixture(autouse=True)
def no_global_output_type():
    cuml.set_global_output_type(None)
    yield
    cuml.set_global_output_type(None)


def _data(n=30):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 3))
    return X, (X[:, 0] > 0).astype(int)


def _frame(X):
    return pd.DataFrame(X, columns=["a", "b", "c"], index=np.arange(100, 100 + len(X)))


# ---- the classes -------------------------------------------------------------------------

def test_classes_are_gsb_classes_with_output_type():
    km = KMeans(n_clusters=2, output_type="numpy")
    assert isinstance(km, gsb.cluster.KMeans) and type(km).__module__ == "cuml.cluster"
    assert km.get_params()["output_type"] == "numpy"
    assert repr(km) == "KMeans(n_clusters=2, output_type='numpy')"
    assert clone(km).output_type == "numpy"
    assert cuml.KMeans is KMeans and cuml.cluster.KMeans is KMeans
    X, _ = _data()
    again = pickle.loads(pickle.dumps(km.set_params(n_init=1).fit(X)))
    assert type(again) is KMeans and again.output_type == "numpy"
    np.testing.assert_array_equal(again.predict(X), km.predict(X))
    from cuml_proxy.proxy import ProxyEstimator
    assert isinstance(km, ProxyEstimator)


# ---- 'input': results mirror the call, fitted attributes mirror fit ---------------------

def test_input_numpy_in_numpy_out():
    X, y = _data()
    lr = LogisticRegression().fit(X, y)
    assert type(lr.coef_) is np.ndarray and type(lr.predict(X)) is np.ndarray
    assert type(lr.predict_proba(X)) is np.ndarray


def test_input_pandas_in_pandas_out():
    X, y = _data()
    df = _frame(X)
    lr = LogisticRegression().fit(df, pd.Series(y))
    assert isinstance(lr.coef_, pd.DataFrame) and isinstance(lr.intercept_, pd.Series)
    pred = lr.predict(df)
    assert isinstance(pred, pd.Series) and pred.index.equals(df.index)
    np.testing.assert_array_equal(pred.to_numpy(),
                                  gsb.linear_model.LogisticRegression().fit(X, y).predict(X))
    proba = lr.predict_proba(df)
    assert isinstance(proba, pd.DataFrame) and proba.shape == (len(X), 2)
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        assert type(lr.predict(X)) is np.ndarray  # each call mirrors its own input
    assert isinstance(lr.coef_, pd.DataFrame)  # attributes mirror fit's


def test_input_list_in_numpy_out():
    X, y = _data()
    lin = LinearRegression().fit(X.tolist(), y.tolist())
    assert type(lin.coef_) is np.ndarray
    assert type(lin.predict(X.tolist())) is np.ndarray


def test_tuples_and_transforms_are_converted():
    X, _ = _data()
    df = _frame(X)
    dist, ind = NearestNeighbors(n_neighbors=2).fit(df).kneighbors(df)
    assert isinstance(dist, pd.DataFrame) and isinstance(ind, pd.DataFrame)
    assert dist.index.equals(df.index)
    out = StandardScaler().fit_transform(df)
    assert isinstance(out, pd.DataFrame) and out.index.equals(df.index)
    nn = NearestNeighbors(n_neighbors=2).fit(df)
    assert isinstance(nn.kneighbors()[0], pd.DataFrame)  # X=None: fit's type


def test_inner_calls_see_numpy():
    """score calls predict, fit_transform calls fit: gsb's own code gets numpy."""
    X, y = _data()
    lr = LogisticRegression(output_type="pandas").fit(X, y)
    assert lr.score(X, y) == pytest.approx(np.mean(lr.predict(X).to_numpy() == y))
    pca = PCA(n_components=2, output_type="pandas")
    assert isinstance(pca.fit_transform(X), pd.DataFrame)
    assert isinstance(pca.components_, pd.DataFrame)
    assert pca.get_feature_names_out().tolist() == ["pca0", "pca1"]


def test_labels_mirror_y():
    le = LabelEncoder().fit(pd.Series(["b", "a", "b"]))
    assert isinstance(le.classes_, pd.Series)
    assert isinstance(le.transform(pd.Series(["a"])), pd.Series)
    assert type(le.transform(np.array(["a"]))) is np.ndarray


# ---- the estimator's output_type and the global one ------------------------------------

@pytest.mark.parametrize("output_type,kind", [
    ("numpy", np.ndarray), ("pandas", pd.Series), ("array", np.ndarray),
    ("series", pd.Series), ("dataframe", pd.Series), ("df_obj", pd.Series)])
def test_estimator_output_type(output_type, kind):
    X, y = _data()
    lr = LogisticRegression(output_type=output_type).fit(X, y)
    assert type(lr.predict(_frame(X).to_numpy())) is kind
    assert type(lr.classes_) is kind


def test_global_type_wins_over_the_estimators_and_input_defers():
    X, y = _data()
    lr = LogisticRegression(output_type="pandas").fit(X, y)
    cuml.set_global_output_type("numpy")
    assert type(lr.predict(X)) is np.ndarray and type(lr.coef_) is np.ndarray
    cuml.set_global_output_type("input")  # 'input' globally: the estimator's own type
    assert isinstance(lr.predict(X), pd.Series)
    with cuml.using_output_type("numpy") as previous:
        assert previous == "input" and cuml.global_settings.output_type == "numpy"
        assert type(lr.coef_) is np.ndarray
    assert cuml.global_settings.output_type == "input"
    cuml.global_settings.output_type = "pandas"
    plain = LogisticRegression().fit(X, y)
    assert isinstance(plain.predict(X), pd.Series)


def test_device_types_need_their_package():
    """'cupy' and 'numba' are real output types (tests/python/test_gpu_arrays.py converts
    to them on a GPU); without the package the setting says what to install."""
    import importlib.util
    X, y = _data()
    for output_type in ("cupy", "numba"):
        if importlib.util.find_spec(output_type) is not None:
            cuml.set_global_output_type(output_type)  # accepted; converts on use
            cuml.set_global_output_type(None)
            continue
        with pytest.raises(ImportError, match=f"needs the {output_type} package"):
            cuml.set_global_output_type(output_type)
        with pytest.raises(ImportError, match=f"needs the {output_type} package"):
            LogisticRegression(output_type=output_type).fit(X, y)
    assert cuml.global_settings.output_type is None  # a refused setting changes nothing


def test_cudf_needs_cudf():
    try:
        import cudf  # noqa: F401
        pytest.skip("cudf is installed")
    except ImportError:
        pass
    with pytest.raises(ImportError, match="needs the cudf package"):
        cuml.set_global_output_type("cudf")


def test_unknown_output_type_in_cumls_words():
    with pytest.raises(ValueError, match=r"`output_type` must be one of 'input', .* or "
                                         r"None. Got: 'xml'"):
        LogisticRegression(output_type="xml").fit(*_data())


# ---- scikit-learn's checks on the shim's classes ---------------------------------------

SHIM_CLASSES = [cls for group in ("cluster", "decomposition", "linear_model", "neighbors",
                                  "preprocessing", "svm")
                for cls in vars(getattr(cuml, group)).values()
                if isinstance(cls, type) and hasattr(cls, "_gsb_desc")]


@parametrize_with_checks([cls() for cls in SHIM_CLASSES],
                         expected_failed_checks=expected_failed_checks)
def test_sklearn_estimator_checks_on_shim_classes(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        check(estimator)


# ---- the version ---------------------------------------------------------------------------

def test_version_is_the_engines_and_the_servers(tmp_path):
    assert cuml.__version__ == gsb.info()["cuml_version"]
    api_level, _, local = cuml.__version__.partition("+")
    assert [int(p) for p in api_level.split(".")] >= [25, 2]
    assert local == f"gsb.{gsb.__version__}"
    srv = gsb.server.start(listen=["tcp://127.0.0.1:0"], data_dir=tmp_path, device="cpu",
                           log_level="warn")
    try:
        host, port = srv.urls[0][len("tcp://"):].rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("GET", "/health")
        health = json.loads(conn.getresponse().read())
        conn.close()
    finally:
        srv.stop()
    assert health["cuml_version"] == cuml.__version__
    assert health["version"] == gsb.__version__
