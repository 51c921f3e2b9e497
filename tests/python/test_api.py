"""The Python API as users meet it: the scikit-learn contract, inputs, errors,
pickling, saved models, progress and Ctrl-C, configuration and the cuml shim."""
import os
import pickle
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.utils._param_validation import InvalidParameterError

import gsb
from gsb.cluster import KMeans
from gsb.decomposition import PCA
from gsb.linear_model import LinearRegression, LogisticRegression, Ridge
from gsb.neighbors import KNeighborsClassifier
from gsb.preprocessing import LabelEncoder, StandardScaler

from conftest import ORIGINAL_QUICK_START, SHIM, run_with_shim


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("GSB_DATA_DIR", str(tmp_path / "store"))


@pytest.fixture
def blobs():
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(c, 0.3, (60, 4)) for c in (0, 3, 6)])
    y = np.repeat([0, 1, 2], 60)
    return X, y


def test_signature_and_params_match_sklearn():
    import inspect
    from sklearn.cluster import KMeans as SkKMeans
    ours = inspect.signature(KMeans).parameters
    theirs = inspect.signature(SkKMeans).parameters
    assert list(ours) == list(theirs)
    for name in ours:
        assert ours[name].default == theirs[name].default, name
    km = KMeans(n_clusters=3)
    assert km.get_params()["n_clusters"] == 3
    assert clone(km).get_params() == km.get_params()
    km.set_params(n_clusters=5)
    assert km.n_clusters == 5
    with pytest.raises(ValueError, match="Invalid parameter 'nope'"):
        km.set_params(nope=1)


def test_fit_returns_self_and_attributes(blobs):
    X, y = blobs
    km = KMeans(n_clusters=3, random_state=0)
    assert km.fit(X) is km
    assert isinstance(km.cluster_centers_, np.ndarray)
    assert km.cluster_centers_.shape == (3, 4)
    assert km.n_features_in_ == 4
    assert isinstance(km.inertia_, float)


def test_unfitted_and_bad_input_errors(blobs):
    X, y = blobs
    with pytest.raises(NotFittedError):
        KMeans().predict(X)
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        StandardScaler().fit(bad)
    with pytest.raises(ValueError, match="X has 3 features, but StandardScaler is expecting 4"):
        StandardScaler().fit(X).transform(X[:, :3])
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        LinearRegression().fit(X, y[:-1])
    with pytest.raises(InvalidParameterError, match="The 'n_clusters' parameter of KMeans"):
        KMeans(n_clusters=0).fit(X)
    with pytest.raises(ValueError, match="Expected 2D array"):
        StandardScaler().fit(X[:, 0])
    with pytest.raises(TypeError, match="Sparse data"):
        import scipy.sparse
        StandardScaler().fit(scipy.sparse.csr_matrix(X))


def test_dtypes_and_layouts(blobs):
    X, _ = blobs
    for dtype in (np.float32, np.float64):
        out = StandardScaler().fit_transform(X.astype(dtype))
        assert out.dtype == dtype
    c = StandardScaler().fit_transform(np.ascontiguousarray(X))
    f = StandardScaler().fit_transform(np.asfortranarray(X))
    lst = StandardScaler().fit_transform(X.tolist())
    np.testing.assert_array_equal(c, f)
    np.testing.assert_array_equal(c, lst)
    ints = StandardScaler().fit_transform((X * 10).astype(np.int64))
    assert ints.dtype == np.float64


_MISALIGNED_CHILD = """
import numpy as np
from gsb.linear_model import LinearRegression, LogisticRegression
from gsb.preprocessing import StandardScaler
rng = np.random.default_rng(3)
X = rng.normal(size=(130, 5))
y = (X @ rng.normal(size=5) > 0).astype(int)
for dtype in (np.float32, np.float64):
    Xa = X.astype(dtype)
    ref = LogisticRegression().fit(Xa, y)
    for off in [o for o in range(1, 8) if o % Xa.itemsize]:
        buf = np.zeros(Xa.nbytes + 8, np.uint8)
        Xm = np.frombuffer(buf.data, dtype=dtype, count=Xa.size, offset=off).reshape(Xa.shape)
        Xm[...] = Xa
        assert not Xm.flags.aligned
        np.testing.assert_array_equal(ref.predict_proba(Xm), ref.predict_proba(Xa))
        got = LogisticRegression().fit(Xm, y)
        np.testing.assert_array_equal(got.coef_, ref.coef_)
        np.testing.assert_array_equal(LinearRegression().fit(Xm, y).coef_,
                                      LinearRegression().fit(Xa, y).coef_)
        np.testing.assert_array_equal(StandardScaler().fit_transform(Xm),
                                      StandardScaler().fit_transform(Xa))
print("ok")
"""


def test_misaligned_input():
    """Data at any byte offset (Dask deserialises blocks so) are copied, not handed
    to BLAS: OpenBLAS's single-threaded gemv faulted on them (a Dask worker's
    predict_proba).  In a child, one OpenMP thread as Dask's workers have, so a
    fault fails the test rather than the run."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", _MISALIGNED_CHILD], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_pandas_input(blobs):
    pd = pytest.importorskip("pandas")
    X, y = blobs
    df = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    model = LogisticRegression().fit(df, pd.Series(y))
    assert list(model.feature_names_in_) == ["a", "b", "c", "d"]
    np.testing.assert_array_equal(model.predict(df), LogisticRegression().fit(X, y).predict(X))


@pytest.mark.parametrize("labels", [np.array(["cat", "dog", "emu"]), np.array([-1.0, 2.0, 7.0]),
                                    np.array([10, 20, 30])])
def test_classifier_label_types(blobs, labels):
    X, y = blobs
    yl = labels[y]
    for model in (LogisticRegression(), KNeighborsClassifier()):
        pred = model.fit(X, yl).predict(X)
        assert pred.dtype == yl.dtype
        np.testing.assert_array_equal(model.classes_, labels)
        assert model.score(X, yl) > 0.95


def test_label_encoder_strings():
    le = LabelEncoder().fit(["paris", "tokyo", "paris", "amsterdam"])
    np.testing.assert_array_equal(le.classes_, ["amsterdam", "paris", "tokyo"])
    np.testing.assert_array_equal(le.transform(["tokyo", "paris"]), [2, 1])
    np.testing.assert_array_equal(le.inverse_transform([0]), ["amsterdam"])
    with pytest.raises(ValueError, match="previously unseen labels"):
        le.transform(["rome"])


def test_pipeline_gridsearch_cross_val(blobs):
    X, y = blobs
    pipe = make_pipeline(StandardScaler(), PCA(n_components=2), LogisticRegression())
    assert cross_val_score(pipe, X, y, cv=3).mean() > 0.95
    grid = GridSearchCV(KNeighborsClassifier(), {"n_neighbors": [1, 5, 9]}, cv=3).fit(X, y)
    assert grid.best_params_["n_neighbors"] in (1, 5, 9)
    assert grid.score(X, y) > 0.95


def test_pickle_identical_predictions(blobs):
    X, y = blobs
    for model in (KMeans(n_clusters=3, random_state=0).fit(X), Ridge().fit(X, y),
                  LogisticRegression().fit(X, np.array(["a", "b", "c"])[y]),
                  PCA(n_components=2).fit(X)):
        back = pickle.loads(pickle.dumps(model))
        method = "transform" if isinstance(model, PCA) else "predict"
        np.testing.assert_array_equal(getattr(back, method)(X), getattr(model, method)(X))
    unfitted = pickle.loads(pickle.dumps(KMeans(n_clusters=4)))
    assert unfitted.n_clusters == 4


def test_corrupt_pickle_is_an_error(blobs):
    X, _ = blobs
    state = StandardScaler().fit(X).__getstate__()
    blob = bytearray(state["_gsb_blob"])
    blob[len(blob) // 2] ^= 0xFF
    state["_gsb_blob"] = bytes(blob)
    model = StandardScaler.__new__(StandardScaler)
    with pytest.raises(ValueError, match="checksum"):
        model.__setstate__(state)


def test_save_load_list_delete(blobs):
    X, y = blobs
    model = LogisticRegression().fit(X, np.array(["x", "y", "z"])[y])
    model.save("clf")
    StandardScaler().fit(X).save("scaler")
    assert gsb.list_saved() == ["clf", "scaler"]
    back = gsb.load("clf")
    np.testing.assert_array_equal(back.predict(X), model.predict(X))
    gsb.delete_saved("clf")
    assert gsb.list_saved() == ["scaler"]
    with pytest.raises(KeyError, match="no saved model named 'clf'"):
        gsb.load("clf")


def test_verbose_prints_progress(blobs, capsys):
    X, _ = blobs
    KMeans(n_clusters=3, random_state=0, verbose=1).fit(X)
    assert "KMeans: iteration 0" in capsys.readouterr().err


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_cancels_fit_cleanly():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200_000, 16)).astype(np.float32)
    # on the CPU: a GPU can converge (labels unchanged) before the signal comes
    device = gsb.get_config()["device"]
    km = KMeans(n_clusters=64, n_init=1, max_iter=100_000, tol=0.0, random_state=0)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    gsb.set_config(device="cpu")  # the engine model is made at fit, on the CPU
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            km.fit(X)
    finally:
        timer.cancel()  # never let a late SIGINT escape into the rest of the run
        gsb.set_config(device=device)
    assert not hasattr(km, "cluster_centers_")
    km.set_params(max_iter=5).fit(X[:1000])  # still usable
    assert km.cluster_centers_.shape == (64, 16)


def test_config():
    assert gsb.get_config()["device"] in ("auto", "cpu", "cuda")
    with pytest.raises(ValueError, match="device must be one of"):
        gsb.set_config(device="tpu")
    with pytest.raises(ConnectionError, match="tcp://127.0.0.1:1"):
        gsb.connect("tcp://127.0.0.1:1")
    gsb.connect(None)
    assert gsb.info()["version"] == gsb.__version__


def test_original_quick_start_runs_unchanged(tmp_path):
    r = run_with_shim(ORIGINAL_QUICK_START, GSB_DATA_DIR=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert gsb.__version__ in r.stdout
    assert "['my_scaler', 'my_svm']" in r.stdout


def test_shim_refuses_to_hide_a_real_cuml(tmp_path):
    fake = tmp_path / "cuml"
    fake.mkdir()
    (fake / "__init__.py").write_text("__version__ = 'real'\n")
    code = "import cuml; print(cuml.__version__)"
    path = os.pathsep.join([SHIM, str(tmp_path)] +
                           [p for p in [os.environ.get("PYTHONPATH")] if p])
    env = {**os.environ, "PYTHONPATH": path}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode != 0 and "shadowing a real cuML" in r.stderr
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**env, "GSB_CUML_SHIM": "1"})
    assert r.returncode == 0 and r.stdout.strip() == gsb.info()["cuml_version"]
