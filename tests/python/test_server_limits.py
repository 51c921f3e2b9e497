"""gsbd's limits as a Python user meets them (docs/REMOTE.md, "Limits"): a server at its
connection limit refuses with a ConnectionError that says which limit, its /health still
answers, a memory budget that is used up raises MemoryError naming it (and the session goes
on), and a session the server closed for idleness while it held nothing comes back by
itself on the next call."""
import gc
import json
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

import gsb
import gsb.server
from gsb.linear_model import LinearRegression


def data(n=200, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, X @ rng.normal(size=d) + 0.1 * rng.normal(size=n)


def http_get(url, path):
    """(status, body) of GET path on a gsbd tcp:// URL."""
    try:
        with urllib.request.urlopen(f"http://{url[len('tcp://'):]}{path}", timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@pytest.fixture(autouse=True)
def embedded_after(monkeypatch, tmp_path):
    monkeypatch.setenv("GSB_DATA_DIR", str(tmp_path / "embedded"))
    for var in ("GSB_URL", "GSB_TOKEN", "GSB_TOKEN_FILE"):
        monkeypatch.delenv(var, raising=False)
    yield
    gsb.connect(None)
    gc.collect()


def start(tmp_path, **limits):
    return gsb.server.start(listen=["tcp://127.0.0.1:0", f"unix://{tmp_path}/s.sock"],
                            data_dir=tmp_path / "store", device="cpu", log_stderr=False,
                            **limits)


def test_connection_limit_is_a_connection_error_saying_why(tmp_path):
    X, y = data()
    with start(tmp_path, max_connections=2, reserved_connections=0) as srv:
        url = srv.url_of("tcp")
        held = []
        for _ in range(2):  # two sessions, each with a model: nothing idle to close
            gsb.connect(url)
            held.append(LinearRegression().fit(X, y))
        with pytest.raises(ConnectionError, match=r"refused the connection: gsbd is at its "
                                                  r"connection limit: 2 connections are open "
                                                  r"\(--max-connections 2\)"):
            gsb.connect(url)
        status, body = http_get(url, "/health")
        assert status == 200 and json.loads(body)["limits"]["max_connections"] == 2
        status, body = http_get(url, "/v1/models")
        assert status == 503 and "connection limit" in json.loads(body)["error"]
        np.testing.assert_allclose(held[0].predict(X), held[1].predict(X))  # they go on
        del held
        gc.collect()


@pytest.mark.parametrize("scheme", ["tcp", "unix"])
def test_memory_budget_is_a_memory_error_naming_it(tmp_path, scheme):
    X, y = data()
    with start(tmp_path, memory_budget_mb=4) as srv:
        gsb.connect(srv.url_of(scheme))
        h = gsb.put(np.ones((3 << 20) // 8))       # 3 MiB: fits
        with pytest.raises(MemoryError, match=r"gsbd's memory budget cannot take .*"
                                              r"--memory-budget-mb"):
            gsb.put(np.ones((2 << 20) // 8))       # 2 MiB more: does not
        model = LinearRegression().fit(X, y)       # the session goes on
        assert model.predict(X[:3]).shape == (3,)
        status, metrics = http_get(srv.url_of("tcp"), "/metrics")
        assert status == 200
        assert "gsbd_memory_budget_bytes 4194304\n" in metrics
        assert 'gsbd_memory_used_bytes{use="data"} 3145728\n' in metrics
        assert "gsbd_memory_budget_refusals_total 0\n" not in metrics
        h.free()
        h2 = gsb.put(np.ones((2 << 20) // 8))      # freed: room again
        h2.free()
        del model
        gsb.connect(None)
        gc.collect()


@pytest.mark.parametrize("scheme", ["tcp", "unix"])
def test_idle_session_comes_back_and_models_keep_theirs(tmp_path, scheme):
    X, y = data()
    with start(tmp_path, idle_timeout_s=1) as srv:
        gsb.connect(srv.url_of(scheme))
        gsb.session_info()                         # a connection, an empty session
        time.sleep(2.5)                            # closed by the server meanwhile
        model = LinearRegression().fit(X, y)       # a new server-side session, unseen
        expected = model.predict(X)
        time.sleep(2.5)                            # it holds a model: never timed out
        np.testing.assert_array_equal(model.predict(X), expected)
        status, metrics = http_get(srv.url_of("tcp"), "/metrics")
        assert "gsbd_connections_idle_closed_total 0\n" not in metrics
        del model
        gsb.connect(None)
        gc.collect()
