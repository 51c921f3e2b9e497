"""The scikit-learn contract where users found it broken: feature names of DataFrames,
3-D input, callables the engine cannot run, get_feature_names_out and set_output (in a
ColumnTransformer and a Pipeline).  Each behaviour is compared with scikit-learn's
estimator of the same name: the same exception type and message, the same warning."""
import pickle
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import make_pipeline
from sklearn.utils import all_estimators
from sklearn.utils._param_validation import InvalidParameterError

import gsb
from gsb._registry import ALL
from gsb.cluster import KMeans
from gsb.decomposition import PCA, TruncatedSVD
from gsb.linear_model import LogisticRegression
from gsb.neighbors import KNeighborsClassifier
from gsb.preprocessing import MinMaxScaler, StandardScaler
from gsb.svm import SVC

SKLEARN = dict(all_estimators())
NAMES = ["alpha", "beta", "gamma", "delta"]
# every estimator that takes a 2-D X (LabelEncoder takes 1-D labels) and has a scikit-learn
# class to compare with (UMAP's reference is umap-learn: test_parity_umap.py)
TWO_D = sorted(n for n in ALL if n != "LabelEncoder" and n in SKLEARN)
# ... and of those, the ones with a method taking X after fit (TSNE, as scikit-learn's,
# has fit and fit_transform only)
X_AFTER_FIT = [n for n in TWO_D
               if any(hasattr(ALL[n], m) for m in ("predict", "transform", "kneighbors"))]


@pytest.fixture
def own_store(tmp_path, monkeypatch):
    """A session of its own whose model store is in tmp_path (a session opens its store
    once, at its first save: a fresh session reads the new GSB_DATA_DIR)."""
    from gsb import _session
    previous = _session.get_session()
    monkeypatch.setenv("GSB_DATA_DIR", str(tmp_path))
    gsb.connect(f"local?device={gsb.get_config()['device']}")
    yield tmp_path
    gsb.connect(None)
    _session._current = previous  # the same URL: connect(None) alone would keep this one


def _data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)) + 2.0
    y = (X[:, 0] + 0.5 * rng.normal(size=n) > 2.0).astype(int)
    return X, y


def _fitted(cls, X, y):
    est = cls()
    if "n_neighbors" in est.get_params():
        est.set_params(n_neighbors=3)
    if "n_components" in est.get_params():
        est.set_params(n_components=2)
    if "n_clusters" in est.get_params():
        est.set_params(n_clusters=2, n_init=1)
    return est.fit(X, y)


def _method(est):
    """A method of est that takes X after fit, and its call."""
    for name in ("predict", "transform", "kneighbors"):
        if hasattr(est, name):
            return name
    raise AssertionError(type(est).__name__)


def _outcome(fn):
    """(exception type, message) or (None, [warning messages]) of fn()."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - the comparison is the test
            return type(e), str(e)
    return None, sorted(str(w.message) for w in record if w.category is UserWarning)


def _both(name, make_X_fit, make_X_call):
    """The outcome of fit on make_X_fit() then the method on make_X_call(), for gsb and
    for scikit-learn's estimator of the same name."""
    X, y = _data()
    out = {}
    for side, cls in (("gsb", ALL[name]), ("sklearn", SKLEARN[name])):
        est = _fitted(cls, make_X_fit(X), y)
        method = getattr(est, _method(est))
        out[side] = _outcome(lambda: method(make_X_call(X)))
    return out["gsb"], out["sklearn"]


# ---- feature names ----------------------------------------------------------------------

@pytest.mark.parametrize("name", X_AFTER_FIT)
def test_renamed_columns_raise_as_sklearn(name):
    renamed = ["alpha", "beta", "gamma", "epsilon"]
    got, want = _both(name, lambda X: pd.DataFrame(X, columns=NAMES),
                      lambda X: pd.DataFrame(X, columns=renamed))
    assert want[0] is ValueError
    assert got == want
    assert "The feature names should match those that were passed during fit." in got[1]
    assert "Feature names unseen at fit time:\n- epsilon\n" in got[1]
    assert "Feature names seen at fit time, yet now missing:\n- delta\n" in got[1]


@pytest.mark.parametrize("name", X_AFTER_FIT)
def test_reordered_columns_raise_as_sklearn(name):
    got, want = _both(name, lambda X: pd.DataFrame(X, columns=NAMES),
                      lambda X: pd.DataFrame(X, columns=NAMES)[NAMES[::-1]])
    assert got == want
    assert "Feature names must be in the same order as they were in fit." in got[1]


@pytest.mark.parametrize("name", X_AFTER_FIT)
def test_array_after_dataframe_fit_warns_as_sklearn(name):
    got, want = _both(name, lambda X: pd.DataFrame(X, columns=NAMES), lambda X: X)
    assert got == want
    assert got[1] == [f"X does not have valid feature names, but {name} was fitted with "
                      f"feature names"]


@pytest.mark.parametrize("name", X_AFTER_FIT)
def test_dataframe_after_array_fit_warns_as_sklearn(name):
    got, want = _both(name, lambda X: X, lambda X: pd.DataFrame(X, columns=NAMES))
    assert got == want
    assert got[1] == [f"X has feature names, but {name} was fitted without feature names"]


def test_matching_dataframe_is_quiet_and_names_are_kept():
    X, y = _data()
    df = pd.DataFrame(X, columns=NAMES)
    est = LogisticRegression().fit(df, y)
    assert list(est.feature_names_in_) == NAMES
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est.predict(df)
        est.predict_proba(df)
        est.score(df, y)
    again = pickle.loads(pickle.dumps(est))
    with pytest.raises(ValueError, match="The feature names should match"):
        again.predict(df.rename(columns={"alpha": "a"}))
    est.fit(X, y)  # refit on an array forgets the names
    assert not hasattr(est, "feature_names_in_")


def test_feature_names_survive_save_and_load(own_store):
    X, y = _data()
    LogisticRegression().fit(pd.DataFrame(X, columns=NAMES), y).save("named")
    est = gsb.load("named")
    assert gsb.list_saved() == ["named"] and (own_store / "models.db").exists()
    assert list(est.feature_names_in_) == NAMES
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        est.predict(X)


def test_data_handle_after_dataframe_fit_is_quiet():
    """A handle holds no column names to compare: gsb does not warn about it."""
    X, y = _data()
    est = StandardScaler().fit(pd.DataFrame(X, columns=NAMES))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = est.transform(gsb.put(X))
    np.testing.assert_allclose(out, est.transform(pd.DataFrame(X, columns=NAMES)))


def test_mixed_column_name_types_raise_as_sklearn():
    X, y = _data()
    df = pd.DataFrame(X, columns=["a", "b", 3, 4])
    got = _outcome(lambda: LogisticRegression().fit(df, y))
    want = _outcome(lambda: SKLEARN["LogisticRegression"]().fit(df, y))
    assert got[0] is TypeError and got == want


# ---- 3-D input ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", TWO_D)
def test_3d_X_raises_as_sklearn(name):
    X, y = _data()
    X3 = X.reshape(len(X), 2, 2)
    got_fit = _outcome(lambda: _fitted(ALL[name], X3, y))
    want_fit = _outcome(lambda: _fitted(SKLEARN[name], X3, y))
    assert got_fit[0] is ValueError and got_fit == want_fit
    assert got_fit[1] == f"Found array with dim 3, while dim <= 2 is required by {name}."
    if name not in X_AFTER_FIT:
        return
    got, want = _both(name, lambda X: X, lambda X: X.reshape(len(X), 2, 2))
    assert got[0] is ValueError and got == want


def test_3d_data_handle_is_refused():
    with pytest.raises(ValueError, match="Found array with dim 3"):
        gsb.put(np.zeros((2, 2, 2)))


# ---- callables the engine cannot call --------------------------------------------------

def test_callable_kernel_is_refused_in_sklearn_style():
    X, y = _data()
    with pytest.raises(InvalidParameterError) as e:
        SVC(kernel=lambda a, b: a @ b.T).fit(X, y)
    message = str(e.value)
    assert message.startswith("The 'kernel' parameter of SVC must be a str among "
                              "{'linear', 'poly', 'rbf', 'sigmoid', 'precomputed'}. Got "
                              "<function")
    assert "Callables are not supported by gsb" in message
    assert "kernel='precomputed'" in message
    assert isinstance(e.value, ValueError)  # as scikit-learn's InvalidParameterError is


@pytest.mark.parametrize("make", [
    lambda: KNeighborsClassifier(metric=lambda a, b: np.abs(a - b).sum()),
    lambda: KMeans(n_clusters=2, init=lambda X, k, random_state: X[:k]),
], ids=["metric", "init"])
def test_other_callables_are_refused(make):
    X, y = _data()
    est = make()
    with pytest.raises(InvalidParameterError, match="Callables are not supported by gsb") as e:
        est.fit(X, y)
    assert "='precomputed' instead" not in str(e.value)  # no precomputed metric to point at


# ---- get_feature_names_out and set_output -----------------------------------------------

@pytest.mark.parametrize("est,names", [
    (StandardScaler(), NAMES),
    (MinMaxScaler(), NAMES),
    (PCA(n_components=2), ["pca0", "pca1"]),
    (TruncatedSVD(n_components=3), ["truncatedsvd0", "truncatedsvd1", "truncatedsvd2"]),
    (KMeans(n_clusters=2, n_init=1), ["kmeans0", "kmeans1"]),
], ids=lambda v: type(v).__name__ if not isinstance(v, list) else "")
def test_get_feature_names_out_as_sklearn(est, names):
    X, _ = _data()
    df = pd.DataFrame(X, columns=NAMES)
    assert list(est.fit(df).get_feature_names_out()) == names
    sk = SKLEARN[type(est).__name__](**est.get_params()).fit(df)
    assert list(sk.get_feature_names_out()) == names
    out = est.set_output(transform="pandas").transform(df)
    assert isinstance(out, pd.DataFrame) and list(out.columns) == names
    assert out.index.equals(df.index)
    assert isinstance(est.set_output(transform="default").transform(df), np.ndarray)


def test_column_transformer_with_pandas_output_matches_sklearn():
    X, _ = _data(60)
    df = pd.DataFrame(np.column_stack([X, X[:, ::-1] * 3.0]),
                      columns=NAMES + ["w", "x", "y", "z"], index=np.arange(100, 160))
    sk = {n: SKLEARN[n] for n in ("StandardScaler", "MinMaxScaler", "PCA", "TruncatedSVD")}

    def make(lib):
        return ColumnTransformer([
            ("std", lib["StandardScaler"](), ["alpha", "beta"]),
            ("mm", lib["MinMaxScaler"](), ["gamma", "delta"]),
            ("pca", lib["PCA"](n_components=2), ["w", "x", "y"]),
            ("svd", lib["TruncatedSVD"](n_components=2, algorithm="arpack"),
             ["x", "y", "z"]),
        ]).set_output(transform="pandas")

    got = make({n: ALL[n] for n in sk}).fit_transform(df)
    want = make(sk).fit_transform(df)
    assert isinstance(got, pd.DataFrame)
    assert list(got.columns) == list(want.columns) == [
        "std__alpha", "std__beta", "mm__gamma", "mm__delta", "pca__pca0", "pca__pca1",
        "svd__truncatedsvd0", "svd__truncatedsvd1"]
    assert got.index.equals(df.index)
    # components are defined up to sign: compare magnitudes of those columns
    np.testing.assert_allclose(np.abs(got.to_numpy()), np.abs(want.to_numpy()), rtol=1e-6,
                               atol=1e-9)


def test_pipeline_set_output_pandas_and_polars():
    X, _ = _data()
    df = pd.DataFrame(X, columns=NAMES)
    pipe = make_pipeline(StandardScaler(), PCA(n_components=2)).set_output(transform="pandas")
    out = pipe.fit_transform(df)
    assert isinstance(out, pd.DataFrame) and list(out.columns) == ["pca0", "pca1"]
    np.testing.assert_allclose(out.to_numpy(), pipe.transform(df).to_numpy())
    pl = pytest.importorskip("polars")
    out = pipe.set_output(transform="polars").fit_transform(df)
    assert isinstance(out, pl.DataFrame) and out.columns == ["pca0", "pca1"]


def test_transformers_without_names_out_have_no_set_output():
    from gsb.preprocessing import LabelEncoder
    assert not hasattr(LabelEncoder(), "set_output")
    with pytest.raises(AttributeError, match=re.escape("set_output")):
        LogisticRegression().set_output(transform="pandas")


def test_long_choice_lists_are_whole_in_parameter_errors():
    """The engine's InvalidParameterError lists every choice (it cut KNN's 28 metrics)."""
    X, y = _data()
    with pytest.raises(InvalidParameterError) as e:
        KNeighborsClassifier(metric="nope").fit(X, y)
    assert re.fullmatch(r"The 'metric' parameter of KNeighborsClassifier must be a str among "
                        r"\{'braycurtis', [^}]*'sqeuclidean', 'yule'\}\. Got 'nope' instead\.",
                        str(e.value)), str(e.value)


@pytest.mark.parametrize("labels", [np.array(["no", "yes"]), np.array([False, True]),
                                    np.array([3, 7])], ids=["str", "bool", "int"])
def test_saved_classifier_keeps_its_labels(own_store, labels):
    """docs/PYTHON.md: classes_ and predictions after gsb.load are the fitted labels."""
    X, y = _data()
    est = LogisticRegression().fit(X, labels[y])
    est.save("labelled")
    again = gsb.load("labelled")
    assert again.classes_.dtype == labels.dtype
    np.testing.assert_array_equal(again.classes_, labels)
    np.testing.assert_array_equal(again.predict(X), est.predict(X))


def test_labels_json_cannot_hold_come_back_as_codes(own_store):
    """docs/PYTHON.md: datetimes and other objects JSON cannot hold are saved as codes."""
    X, y = _data()
    labels = np.array(["2020-01-01", "2021-01-01"], dtype="datetime64[D]")
    est = LogisticRegression().fit(X, labels[y])
    est.save("dated")
    np.testing.assert_array_equal(gsb.load("dated").classes_, [0.0, 1.0])
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(est)).classes_, labels)
