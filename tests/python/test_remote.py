"""Python through gsbd: a server started in this process (gsb.server.start) on TCP and
on a Unix socket, and the same estimators, saved models, pickles, data handles,
arena arrays and errors as embedded, number for number.  Also: tokens, dead URLs,
and the `gsbd` command as a subprocess."""
import contextlib
import gc
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.utils._param_validation import InvalidParameterError

import gsb
import gsb.server
from gsb.cluster import KMeans
from gsb.decomposition import PCA
from gsb.linear_model import LinearRegression, LogisticRegression
from gsb.neighbors import KNeighborsClassifier
from gsb.preprocessing import StandardScaler

from conftest import ORIGINAL_QUICK_START, fitted_attrs, run_with_shim

DEVICE = os.environ.get("GSB_DEVICE", "cpu")
PYTHON_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "python")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gsbd")
    srv = gsb.server.start(listen=["tcp://127.0.0.1:0", f"unix://{tmp}/s.sock"],
                           data_dir=tmp / "store", device=DEVICE, log_level="warn")
    yield srv
    gsb.connect(None)
    gc.collect()  # models of the server's sessions go before the server
    srv.stop()


@pytest.fixture(autouse=True)
def embedded_store(tmp_path, monkeypatch):
    monkeypatch.setenv("GSB_DATA_DIR", str(tmp_path / "embedded"))
    for var in ("GSB_URL", "GSB_TOKEN", "GSB_TOKEN_FILE"):
        monkeypatch.delenv(var, raising=False)
    yield
    gsb.connect(None)


@pytest.fixture(params=["tcp", "unix"])
def url(request, server):
    return server.url_of(request.param)


@contextlib.contextmanager
def on(url):
    """Models created inside run on url (None: embedded)."""
    gsb.connect(url)
    try:
        yield
    finally:
        gsb.connect(None)


def data(dtype=np.float64, n=240, d=6, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-4, 4, size=(3, d))
    cls = rng.integers(0, 3, size=n)
    X = (centers[cls] + rng.normal(size=(n, d))).astype(dtype)
    y = (X @ rng.normal(size=d) + 0.1 * rng.normal(size=n)).astype(dtype)
    return X, y, np.array(["setosa", "versicolor", "virginica"])[cls]


def same(a, b, what):
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), what
        assert a.dtype == b.dtype and a.shape == b.shape, f"{what}: {a.dtype}{a.shape} " \
                                                          f"vs {b.dtype}{b.shape}"
        assert np.array_equal(a, b), f"{what}: remote and embedded differ"
    else:
        assert type(a) is type(b) and (a == b or (a != a and b != b)), f"{what}: {a!r} {b!r}"


def workload(X, y, labels):
    """Every number the six estimators give: fitted attributes and method results."""
    out = {}
    models = {
        "KMeans": KMeans(n_clusters=3, random_state=0, n_init=2).fit(X),
        "LinearRegression": LinearRegression().fit(X, y),
        "LogisticRegression": LogisticRegression().fit(X, labels),
        "PCA": PCA(n_components=3).fit(X),
        "StandardScaler": StandardScaler().fit(X),
        "KNeighborsClassifier": KNeighborsClassifier(n_neighbors=5).fit(X, labels),
    }
    for name, m in models.items():
        for attr, value in fitted_attrs(m).items():
            out[f"{name}.{attr}"] = value
    km, lr, log, pca, sc, knn = models.values()
    out["KMeans.predict"] = km.predict(X)
    out["KMeans.transform"] = km.transform(X)
    out["KMeans.score"] = km.score(X)
    out["LinearRegression.predict"] = lr.predict(X)
    out["LinearRegression.score"] = lr.score(X, y)
    out["LogisticRegression.predict"] = log.predict(X)
    out["LogisticRegression.predict_proba"] = log.predict_proba(X)
    out["LogisticRegression.decision_function"] = log.decision_function(X)
    out["PCA.transform"] = pca.transform(X)
    out["PCA.fit_transform"] = PCA(n_components=3).fit_transform(X)
    out["PCA.inverse_transform"] = pca.inverse_transform(pca.transform(X))
    out["StandardScaler.transform"] = sc.transform(X)
    out["StandardScaler.fit_transform"] = StandardScaler().fit_transform(X)
    out["KNeighborsClassifier.predict"] = knn.predict(X)
    out["KNeighborsClassifier.predict_proba"] = knn.predict_proba(X)
    dist, idx = knn.kneighbors(X[:20], n_neighbors=4)
    out["KNeighborsClassifier.kneighbors.dist"] = dist
    out["KNeighborsClassifier.kneighbors.idx"] = idx
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_remote_numbers_identical_to_embedded(url, dtype):
    X, y, labels = data(dtype)
    local = workload(X, y, labels)
    with on(url):
        remote = workload(X, y, labels)
        assert gsb.session_info()["transport"] == url.split(":")[0]
    assert sorted(remote) == sorted(local)
    for key in local:
        same(remote[key], local[key], key)


def test_models_remember_their_session(url):
    X, y, _ = data()
    with on(url):
        lr = LinearRegression().fit(X, y)
        assert lr.__dict__["_gsb_handle"].session.remote
    # after going back to embedded, the remote model still answers from the server
    same(lr.predict(X), LinearRegression().fit(X, y).predict(X), "predict")
    assert not LinearRegression().fit(X, y).__dict__["_gsb_handle"].session.remote


def test_session_info(url):
    assert gsb.session_info()["transport"] == "local"
    with on(url):
        info = gsb.session_info()
    assert info["transport"] == url.split(":")[0]
    assert info["status"] == "ok" and info["version"] == gsb.__version__
    assert "backend" in info


def test_original_quick_start_through_the_server(url):
    with on(url):
        for name in gsb.list_saved():
            gsb.delete_saved(name)
    code = ORIGINAL_QUICK_START + 'import gsb\nprint(gsb.session_info()["transport"])\n'
    r = run_with_shim(code, GSB_URL=url)
    assert r.returncode == 0, r.stderr
    assert gsb.__version__ in r.stdout
    assert "['my_scaler', 'my_svm']" in r.stdout
    assert url.split(":")[0] in r.stdout
    # the models are in the server's store, shared with every client, not the embedded one
    assert not {"my_scaler", "my_svm"} & set(gsb.list_saved())
    with on(url):
        assert gsb.list_saved() == ["my_scaler", "my_svm"]
        assert type(gsb.load("my_svm")).__name__ == "SVC"
        for name in ("my_scaler", "my_svm"):
            gsb.delete_saved(name)


def test_save_load_list_delete_on_the_server(url):
    X, y, labels = data()
    with on(url):
        model = LogisticRegression().fit(X, labels)
        model.save("remote_clf")
        assert "remote_clf" in gsb.list_saved()
        back = gsb.load("remote_clf")
        assert back.__dict__["_gsb_handle"].session.remote
        same(back.predict_proba(X), model.predict_proba(X), "predict_proba")
        gsb.delete_saved("remote_clf")
        assert "remote_clf" not in gsb.list_saved()
        with pytest.raises(KeyError, match="no saved model named 'remote_clf'"):
            gsb.load("remote_clf")


def test_pickle_between_remote_and_embedded(url):
    X, y, labels = data(np.float32)
    with on(url):
        remote = [KMeans(n_clusters=3, random_state=0).fit(X), LinearRegression().fit(X, y),
                  LogisticRegression().fit(X, labels), PCA(n_components=2).fit(X)]
        blobs = [pickle.dumps(m) for m in remote]
    for m, blob in zip(remote, blobs):
        back = pickle.loads(blob)  # into the embedded engine
        assert not back.__dict__["_gsb_handle"].session.remote
        method = "transform" if isinstance(m, PCA) else "predict"
        same(getattr(back, method)(X), getattr(m, method)(X), type(m).__name__)
        for attr, value in fitted_attrs(m).items():
            same(fitted_attrs(back)[attr], value, attr)
        again = pickle.dumps(back)
        with on(url):  # and back to the server
            there = pickle.loads(again)
            assert there.__dict__["_gsb_handle"].session.remote
            same(getattr(there, method)(X), getattr(m, method)(X), type(m).__name__)


@pytest.mark.parametrize("where", ["embedded", "tcp", "unix"])
def test_data_handles(server, where):
    url = None if where == "embedded" else server.url_of(where)
    X, y, labels = data()
    codes = np.unique(labels, return_inverse=True)[1].astype(np.float64)
    want_lr = LinearRegression().fit(X, y)
    want_km = KMeans(n_clusters=3, random_state=0).fit(X)
    want_clf = LogisticRegression().fit(X, codes)
    with on(url):
        hX, hy, hc = gsb.put(X), gsb.put(y), gsb.put(codes)
        assert (hX.shape, hX.dtype, hX.ndim, len(hX)) == (X.shape, X.dtype, 2, len(X))
        assert "DataHandle" in repr(hX)
        lr = LinearRegression().fit(hX, hy)
        assert lr.n_features_in_ == X.shape[1]
        same(lr.coef_, want_lr.coef_, "coef_")
        same(lr.predict(hX), want_lr.predict(X), "predict(handle)")
        same(lr.predict(X), want_lr.predict(X), "predict(array)")
        assert lr.score(hX, hy) == want_lr.score(X, y)
        km = KMeans(n_clusters=3, random_state=0).fit(hX)
        same(km.cluster_centers_, want_km.cluster_centers_, "cluster_centers_")
        same(km.predict(hX), want_km.predict(X), "KMeans.predict")
        clf = LogisticRegression().fit(hX, hc)
        same(clf.predict(hX), want_clf.predict(X), "classifier predict")
        same(clf.classes_, want_clf.classes_, "classes_")
        assert clf.score(hX, hc) == want_clf.score(X, codes)
        sc = StandardScaler().fit(hX)
        same(sc.transform(hX), StandardScaler().fit(X).transform(X), "transform")
        with pytest.raises(ValueError, match="X has 3 features, but LinearRegression is "
                                             "expecting 6"):
            lr.predict(gsb.put(X[:, :3]))
        with pytest.raises(TypeError, match="cannot be pickled"):
            pickle.dumps(hX)
        with pytest.raises(TypeError, match="holds no values"):
            np.asarray(hX)
        hX.free()
        with pytest.raises(ValueError, match="freed"):
            lr.predict(hX)
    if url is not None:  # a handle of the server's session, a model of the embedded one
        with on(url):
            h = gsb.put(X)
        with pytest.raises(ValueError, match="put the data on the model's session"):
            want_lr.predict(h)


@pytest.mark.parametrize("where", ["embedded", "tcp", "unix"])
def test_arena_arrays(server, where):
    url = None if where == "embedded" else server.url_of(where)
    X, y, _ = data(np.float32)
    want = LinearRegression().fit(X, y)
    with on(url):
        A = gsb.empty(X.shape, dtype="float32")
        assert isinstance(A, np.ndarray) and A.shape == X.shape and A.dtype == np.float32
        assert A.flags.c_contiguous and A.ctypes.data % 64 == 0
        A[:] = X
        b = gsb.empty(y.shape[0])
        b[:] = y
        lr = LinearRegression().fit(A, b)
        same(lr.coef_, want.coef_, "coef_ from arena arrays")
        same(lr.predict(A[:50]), want.predict(X[:50]), "predict on an arena view")
        same(lr.predict(gsb.put(A)), want.predict(X), "put of an arena array")
        F = gsb.empty(X.shape, dtype=np.float64, order="F")
        F[:] = X
        assert F.flags.f_contiguous
        same(StandardScaler().fit_transform(F), StandardScaler().fit_transform(
            X.astype(np.float64)), "Fortran-order arena array")
        z = gsb.zeros((3, 2), dtype="int64")
        assert z.dtype == np.int64 and not z.any()
        with pytest.raises(TypeError, match="dtype must be"):
            gsb.empty((2, 2), dtype=np.float16)
        view = A[10:20]
        del A, F, z
        gc.collect()
        assert np.array_equal(view, X[10:20])  # a view keeps its block alive
        del view
        gc.collect()
        same(LinearRegression().fit(X, y).coef_, want.coef_, "the session still works")


def outcome(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the point is to compare them
        return type(e), str(e)
    return None, None


def test_errors_keep_their_words(url):
    X, y, _ = data()
    bad = X.copy()
    bad[3, 2] = np.nan

    def nan_fit():
        StandardScaler().fit(bad)

    def engine_unfitted():
        lr = LinearRegression()
        with contextlib.suppress(ValueError):
            lr.fit(bad, y)  # creates the engine model, which stays unfitted
        lr.predict(X)

    cases = {
        "nan": nan_fit,
        "unfitted": lambda: KMeans().predict(X),
        "engine_unfitted": engine_unfitted,
        "bad_param": lambda: KMeans(n_clusters=0).fit(X),
        "bad_choice": lambda: PCA(svd_solver="nope").fit(X),
        "n_features": lambda: StandardScaler().fit(X).transform(X[:, :3]),
        "rows": lambda: LinearRegression().fit(X, y[:-1]),
        "too_many_clusters": lambda: KMeans(n_clusters=500).fit(X),
        "no_such_model": lambda: gsb.load("never_saved"),
    }
    embedded = {k: outcome(fn) for k, fn in cases.items()}
    with on(url):
        remote = {k: outcome(fn) for k, fn in cases.items()}
    expected = {"nan": ValueError, "unfitted": NotFittedError,
                "engine_unfitted": NotFittedError, "bad_param": InvalidParameterError,
                "bad_choice": InvalidParameterError, "n_features": ValueError,
                "rows": ValueError, "too_many_clusters": ValueError, "no_such_model": KeyError}
    for k in cases:
        assert remote[k] == embedded[k], k
        assert remote[k][0] is expected[k], f"{k}: {remote[k]}"
    assert "Input X contains NaN" in remote["nan"][1]


def test_progress_reaches_the_client(url, capsys):
    X, _, _ = data()
    with on(url):
        KMeans(n_clusters=3, random_state=0, verbose=1).fit(X)
    assert "KMeans: iteration 0" in capsys.readouterr().err


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_cancels_a_remote_fit(url, tmp_path):
    import threading
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200_000, 16)).astype(np.float32)
    # a CPU server of the same transport: on a GPU this KMeans can converge
    # (labels unchanged) before the signal comes
    listen = "tcp://127.0.0.1:0" if url.startswith("tcp") else f"unix://{tmp_path}/c.sock"
    with gsb.server.start(listen=[listen], data_dir=tmp_path / "store", device="cpu",
                          log_level="error") as srv, on(srv.urls[0]):
        km = KMeans(n_clusters=64, n_init=1, max_iter=1_000_000, tol=0.0, random_state=0)
        timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        t0 = time.monotonic()
        try:
            with pytest.raises(KeyboardInterrupt):
                km.fit(X)
        finally:
            timer.cancel()  # never let a late SIGINT escape into the rest of the run
        assert time.monotonic() - t0 < 20
        assert not hasattr(km, "cluster_centers_")
        km.set_params(max_iter=3).fit(X[:500])  # the server-side model is usable again
        assert km.cluster_centers_.shape == (64, 16)


def test_dead_urls_say_what_to_do(tmp_path):
    X, y, _ = data()
    before = LinearRegression().fit(X, y).predict(X)
    for dead in ("tcp://127.0.0.1:1", f"unix://{tmp_path}/nobody.sock"):
        with pytest.raises(ConnectionError) as err:
            gsb.connect(dead)
        text = str(err.value)
        assert dead in text and "gsbd" in text and "gsb.connect(None)" in text, text
        # the failed connect changed nothing
        assert gsb.get_config()["url"] is None
        same(LinearRegression().fit(X, y).predict(X), before, "embedded after a failure")


def test_dead_gsb_url_names_the_variable(monkeypatch):
    monkeypatch.setenv("GSB_URL", "tcp://127.0.0.1:1")
    X, y, _ = data()
    gsb._session._config["url"] = None  # "not set by connect": $GSB_URL applies
    with pytest.raises(ConnectionError, match=r"tcp://127\.0\.0\.1:1.*\[URL from \$GSB_URL\]"):
        LinearRegression().fit(X, y)


def test_token_protected_server(tmp_path):
    token = tmp_path / "token"
    token.write_text("correct horse battery staple\n")
    wrong = tmp_path / "wrong"
    wrong.write_text("not it\n")
    X, y, _ = data()
    with gsb.server.start(listen=["tcp://127.0.0.1:0"], data_dir=tmp_path / "store",
                          token_file=token, device=DEVICE, log_level="error") as srv:
        url = srv.urls[0]
        with pytest.raises(ConnectionError, match="token") as err:
            gsb.connect(url)
        assert isinstance(err.value, PermissionError) and url in str(err.value)
        with pytest.raises(ConnectionError, match="token"):
            gsb.connect(url, token_file=wrong)
        gsb.connect(url, token_file=token)
        try:
            lr = LinearRegression().fit(X, y)
            assert gsb.get_config()["url"].startswith(url + "?token_file=")
            same(lr.predict(X), LinearRegression().fit(X, y).predict(X), "predict")
        finally:
            gsb.connect(None)
        with pytest.raises(FileNotFoundError):
            gsb.connect(url, token_file=tmp_path / "missing")
        del lr
        gc.collect()


def test_server_start_arguments(tmp_path):
    with pytest.raises(ValueError, match="device must be one of"):
        gsb.server.start(listen=["tcp://127.0.0.1:0"], device="tpu")
    with pytest.raises(ValueError, match="log_level"):
        gsb.server.start(listen=["tcp://127.0.0.1:0"], log_level="loud")
    srv = gsb.server.start(listen="tcp://127.0.0.1:0", data_dir=tmp_path, device=DEVICE,
                           log_level="error")
    assert srv.running and srv.urls[0].startswith("tcp://127.0.0.1:")
    assert not srv.urls[0].endswith(":0")
    srv.stop()
    srv.stop()  # idempotent
    assert not srv.running
    with pytest.raises(ConnectionError):
        gsb.connect(srv.urls[0])


def test_server_gone_mid_session(tmp_path):
    X, y, _ = data()
    srv = gsb.server.start(listen=[f"unix://{tmp_path}/g.sock"], data_dir=tmp_path,
                           device=DEVICE, log_level="error")
    with on(srv.urls[0]):
        lr = LinearRegression().fit(X, y)
        h = gsb.put(X)
    srv.stop()
    with pytest.raises(ConnectionError, match="gsbd at unix://"):
        lr.predict(X)
    del lr, h  # freeing models and handles of a dead server is quiet
    gc.collect()
    assert LinearRegression().fit(X, y).predict(X).shape == y.shape  # embedded still works


@pytest.mark.skipif(sys.platform == "win32", reason="Unix sockets")
def test_autostart_starts_a_server(tmp_path, monkeypatch):
    from gsb import _autostart
    sock = tmp_path / "auto.sock"
    monkeypatch.setenv("GSB_AUTOSTART", "1")
    monkeypatch.setenv("GSB_DATA_DIR", str(tmp_path))
    if not shutil.which("gsbd"):
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
            p for p in (os.path.abspath(PYTHON_DIR), os.environ.get("PYTHONPATH")) if p))
    X, y, _ = data()
    try:
        with on(f"unix://{sock}"):
            got = LinearRegression().fit(X, y).predict(X)
            assert gsb.session_info()["transport"] == "unix"
        assert len(_autostart.started) == 1
    finally:
        gsb.connect(None)
        gc.collect()
        _autostart.stop_started()
    monkeypatch.delenv("GSB_AUTOSTART")
    # the started gsbd picks its own device (auto): the same numbers to the last
    # bits only when it is the embedded engine's backend, which `same` checks in
    # the tests with an explicit device
    np.testing.assert_allclose(got, LinearRegression().fit(X, y).predict(X), rtol=1e-10,
                               atol=1e-12)


def _gsbd_command():
    exe = shutil.which("gsbd")
    if exe:
        return [exe]
    return [sys.executable, "-m", "gsb.server"]


@pytest.mark.skipif(sys.platform == "win32", reason="Unix sockets and SIGTERM")
def test_gsbd_command_in_a_subprocess(tmp_path):
    sock = tmp_path / "d.sock"
    env = dict(os.environ)
    if not shutil.which("gsbd"):  # running from the source tree: python -m gsb.server
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (os.path.abspath(PYTHON_DIR), env.get("PYTHONPATH")) if p)
    cmd = _gsbd_command() + ["--listen", f"unix://{sock}", "--data-dir", str(tmp_path),
                             "--device", DEVICE, "--log-level", "warn"]
    help_run = subprocess.run(_gsbd_command() + ["--help"], capture_output=True, text=True, env=env,
                              timeout=60)
    if help_run.returncode != 0:
        pytest.skip(f"the gsbd command does not run here: {help_run.stderr[-500:]}")
    assert "--listen" in help_run.stdout and "--token-file" in help_run.stdout
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        deadline = time.monotonic() + 30
        while not sock.exists():
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "gsbd did not create its socket in 30 s"
            time.sleep(0.05)
        X, y, _ = data()
        with on(f"unix://{sock}"):
            lr = LinearRegression().fit(X, y)
            got = lr.predict(X)
            lr.save("from_subprocess")
            assert gsb.list_saved() == ["from_subprocess"]
            del lr
            gc.collect()
        same(got, LinearRegression().fit(X, y).predict(X), "gsbd subprocess vs embedded")
    finally:
        gsb.connect(None)
        gc.collect()
        proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"gsbd did not exit on SIGTERM: {err[-2000:]}")
    assert proc.returncode == 0, err[-2000:]
    assert (tmp_path / "models.db").exists() or any(tmp_path.glob("*.db"))


def _start_gsbd(sock, data_dir):
    env = dict(os.environ)
    if not shutil.which("gsbd"):  # running from the source tree: python -m gsb.server
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (os.path.abspath(PYTHON_DIR), env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen(_gsbd_command() + ["--listen", f"unix://{sock}", "--data-dir",
                                               str(data_dir), "--device", DEVICE,
                                               "--log-level", "error"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 30
    while not sock.exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "gsbd did not create its socket in 30 s"
        time.sleep(0.05)
    return proc


@pytest.mark.skipif(sys.platform == "win32", reason="Unix sockets and SIGKILL")
def test_kill_9_during_a_save_keeps_the_store(tmp_path):
    """gsbd killed with SIGKILL while it writes a model: restarted on the same data
    directory, the store opens cleanly and every model saved before is intact."""
    import threading
    store = tmp_path / "store"
    sock = tmp_path / "k.sock"
    X, y, _ = data()
    proc = _start_gsbd(sock, store)
    try:
        with on(f"unix://{sock}"):
            want = {}
            for i in range(4):
                lr = LinearRegression(fit_intercept=bool(i % 2)).fit(X, y + i)
                lr.save(f"early{i}")
                want[f"early{i}"] = lr.predict(X)
            # big models (a neighbours model keeps its training rows: ~20 MB blobs)
            big = np.random.default_rng(3).normal(size=(300_000, 16))
            knn = KNeighborsClassifier(n_neighbors=1).fit(big, np.arange(300_000) % 3)
            errors = []

            def keep_saving():
                try:
                    for j in range(1000):
                        knn.save(f"big{j}")
                except Exception as e:  # the server dies under it: expected
                    errors.append(e)

            saver = threading.Thread(target=keep_saving)
            saver.start()
            time.sleep(0.5)
            proc.kill()  # SIGKILL, in the middle of some save
            proc.wait(timeout=30)
            saver.join(timeout=60)
            assert errors and isinstance(errors[0], ConnectionError), errors
            del knn
        gsb.connect(None)
        gc.collect()
        sock.unlink(missing_ok=True)
        proc = _start_gsbd(sock, store)
        with on(f"unix://{sock}"):
            names = gsb.list_saved()
            for name, pred in want.items():
                assert name in names
                same(gsb.load(name).predict(X), pred, f"{name} after kill -9")
            for name in names:  # whatever big model got committed loads whole
                if name.startswith("big"):
                    assert gsb.load(name).n_samples_fit_ == 300_000
    finally:
        gsb.connect(None)
        gc.collect()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)


def _rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_64_clients_then_memory_back_to_baseline(tmp_path):
    """64 threads, each its own connection, fit and predict at once; every answer is
    right, and after they leave a second identical round leaves the server's
    memory where the first left it (nothing kept per client)."""
    import threading
    sock = tmp_path / "m.sock"
    proc = _start_gsbd(sock, tmp_path / "store")
    X, y, _ = data()
    want = LinearRegression().fit(X, y).predict(X)

    def one_round():
        errors = []

        def client(i):
            try:
                from gsb._session import Session
                s = Session(f"unix://{sock}")  # a session (connection) of its own
                import ctypes
                from gsb import _lib
                h = ctypes.c_void_p()
                _lib.check(_lib.lib.gsb_model_create(s.handle, b"LinearRegression", b"{}",
                                                     ctypes.byref(h)))
                _lib.lib.gsb_model_free(h)
                # the process-wide session: its pool opens a connection per busy thread
                got = LinearRegression().fit(X, y).predict(X)
                np.testing.assert_allclose(got, want, rtol=1e-12)
                del s
            except Exception as e:
                errors.append(e)

        gsb.connect(f"unix://{sock}")
        assert gsb.session_info()["transport"] == "unix"
        threads = [threading.Thread(target=client, args=(i,)) for i in range(64)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        gsb.connect(None)
        gc.collect()
        time.sleep(0.5)  # the server notices the closed connections
        assert not errors, errors[:3]
        return _rss_kib(proc.pid)

    try:
        first = one_round()
        second = one_round()
        third = one_round()
        assert max(second, third) <= first + 16 * 1024, (first, second, third)
    finally:
        gsb.connect(None)
        gc.collect()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_start_keeps_its_log_out_of_the_users_output(tmp_path, capfd):
    """gsb.server.start shares the user's stderr: its log lines go to the log file."""
    X, y, _ = data()
    log = tmp_path / "gsbd.log"
    capfd.readouterr()
    with gsb.server.start(listen=["tcp://127.0.0.1:0"], data_dir=tmp_path / "store",
                          device=DEVICE, log_file=log, log_level="debug") as srv:
        with on(srv.urls[0]):
            LinearRegression().fit(X, y).predict(X)
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")
    text = log.read_text()
    assert " info connection opened " in text, text[-2000:]
    # asked for, the lines come to stderr too, as `gsbd` prints them
    with gsb.server.start(listen=["tcp://127.0.0.1:0"], data_dir=tmp_path / "store",
                          device=DEVICE, log_file=log, log_level="info", log_stderr=True):
        pass
    assert " info " in capfd.readouterr().err
