"""GSB_AUTOSTART: gsb._autostart.ensure_server(url) finds a gsbd answering GET /health at
url, or starts one and waits for it.  Checked with fake servers (a small Python HTTP
server standing in for gsbd: any machine, no engine needed), with commands that fail or
hang, and with the real gsbd (`gsbd` / `python -m gsb.server`) when the bridge is built."""
import json
import os
import shlex
import signal
import socket
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from socketserver import UnixStreamServer

import numpy as np
import pytest

import gsb

_autostart = pytest.importorskip("gsb._autostart")

FAKE_GSBD = textwrap.dedent(r'''
    """A stand-in for gsbd: answers GET /health on --listen URL after --delay seconds."""
    import json, os, signal, socket, sys, time
    args = sys.argv[1:]
    url = args[args.index("--listen") + 1]
    delay = float(args[args.index("--delay") + 1]) if "--delay" in args else 0.0
    print("fake gsbd starting on", url, flush=True)
    time.sleep(delay)
    if url.startswith("unix://"):
        s = socket.socket(socket.AF_UNIX); s.bind(url[7:])
    else:
        host, port = url[6:].rsplit(":", 1)
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, int(port)))
    s.listen(16)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    body = json.dumps({"status": "ok", "version": "fake", "pid": os.getpid()}).encode()
    while True:
        c, _ = s.accept()
        c.recv(65536)
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                  + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
        c.close()
''')


@pytest.fixture(autouse=True)
def clean_env(tmp_path, monkeypatch):
    monkeypatch.setenv("GSB_DATA_DIR", str(tmp_path / "data"))
    for var in ("GSB_AUTOSTART_CMD", "GSB_AUTOSTART_TIMEOUT", "GSB_URL"):
        monkeypatch.delenv(var, raising=False)
    yield
    _autostart.stop_started()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fake_cmd(tmp_path, url, delay=0.3):
    script = tmp_path / "fake_gsbd.py"
    script.write_text(FAKE_GSBD)
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} --listen {url} " \
           f"--delay {delay}"


# ---- pure parts ------------------------------------------------------------------

def test_parse_and_locality():
    assert _autostart.parse_url("tcp://127.0.0.1:19876") == ("tcp", "127.0.0.1", 19876)
    assert _autostart.parse_url("tcp://[::1]:5?token_file=/x") == ("tcp", "::1", 5)
    assert _autostart.parse_url("unix:///run/user/1/gsbd.sock?x=1") == \
        ("unix", "/run/user/1/gsbd.sock")
    for bad in ("http://127.0.0.1:1", "tcp://127.0.0.1", "unix://relative", "local"):
        with pytest.raises(ValueError):
            _autostart.parse_url(bad)
    for local in ("tcp://127.0.0.1:1", "tcp://127.8.9.10:1", "tcp://localhost:1",
                  "tcp://[::1]:1", "unix:///tmp/s"):
        assert _autostart.is_local(local), local
    for remote in ("tcp://10.1.2.3:1", "tcp://gpu-box.example:1", "tcp://0.0.0.0:1",
                   "tcp://[2001:db8::1]:1"):
        assert not _autostart.is_local(remote), remote


def test_enabled_and_timeout():
    assert _autostart.enabled({"GSB_AUTOSTART": "1"})
    assert _autostart.enabled({"GSB_AUTOSTART": " True "})
    assert not _autostart.enabled({"GSB_AUTOSTART": "0"})
    assert not _autostart.enabled({})
    assert _autostart.timeout_s({}) == 20.0
    assert _autostart.timeout_s({"GSB_AUTOSTART_TIMEOUT": "2.5"}) == 2.5
    for bad in ("soon", "0", "-1"):
        with pytest.raises(ValueError, match="GSB_AUTOSTART_TIMEOUT"):
            _autostart.timeout_s({"GSB_AUTOSTART_TIMEOUT": bad})


def test_server_command():
    env = {"PATH": "/nonexistent"}
    assert _autostart.server_command("tcp://127.0.0.1:19876", "posix", env) == \
        [sys.executable, "-m", "gsb.server"]
    assert _autostart.server_command("unix:///tmp/a.sock?token_file=/t", "posix", env) == \
        [sys.executable, "-m", "gsb.server", "--listen", "unix:///tmp/a.sock"]
    win = _autostart.server_command("tcp://127.0.0.1:20000", "nt",
                                    {"GSB_WSL_DISTRO": "Ubuntu-24.04"})
    assert win[:3] == ["wsl.exe", "-d", "Ubuntu-24.04"]
    assert win[-3:] == ["gsbd", "--listen", "tcp://127.0.0.1:20000"]
    assert _autostart.server_command("tcp://127.0.0.1:19876", "nt", {})[:2] == \
        ["wsl.exe", "--exec"]
    with pytest.raises(_autostart.AutostartError, match="over TCP"):
        _autostart.server_command("unix:///tmp/a.sock", "nt", {})
    assert _autostart.server_command("tcp://127.0.0.1:1", "posix",
                                     {"GSB_AUTOSTART_CMD": "my-gsbd --x 'a b'"}) == \
        ["my-gsbd", "--x", "a b"]


# ---- the health check --------------------------------------------------------------

class Health(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"status": "ok", "path": self.path}).encode() \
            if self.path == "/health" else b"nope"
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class UnixHealth(UnixStreamServer):
    def get_request(self):
        request, _ = super().get_request()
        return request, ("unix", 0)  # BaseHTTPRequestHandler wants a (host, port)


def serve_in_thread(server):
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    return server


def test_health_tcp_ignores_proxies(monkeypatch):
    srv = serve_in_thread(HTTPServer(("127.0.0.1", 0), Health))
    try:
        # a proxy that does not exist: a client that used it would fail
        for var in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "ALL_PROXY"):
            monkeypatch.setenv(var, "http://127.0.0.1:9")
        monkeypatch.setenv("NO_PROXY", "")
        doc = _autostart.health(f"tcp://127.0.0.1:{srv.server_address[1]}")
        assert doc == {"status": "ok", "path": "/health"}
    finally:
        srv.shutdown()
        srv.server_close()


def test_health_unix(tmp_path):
    path = str(tmp_path / "h.sock")
    srv = serve_in_thread(UnixHealth(path, Health))
    try:
        assert _autostart.health(f"unix://{path}") == {"status": "ok", "path": "/health"}
    finally:
        srv.shutdown()
        srv.server_close()


def test_health_nothing_there(tmp_path):
    t0 = time.monotonic()
    assert _autostart.health(f"tcp://127.0.0.1:{free_port()}") is None
    assert _autostart.health(f"unix://{tmp_path}/none.sock") is None
    assert time.monotonic() - t0 < 2


def test_health_not_gsbd(tmp_path):
    class Teapot(Health):
        def do_GET(self):
            self.send_response(418)
            self.send_header("Content-Length", "3")
            self.end_headers()
            self.wfile.write(b"tea")
    srv = serve_in_thread(HTTPServer(("127.0.0.1", 0), Teapot))
    try:
        doc = _autostart.health(f"tcp://127.0.0.1:{srv.server_address[1]}")
        assert doc["status"] == "not gsbd" and "418" in doc["detail"]
    finally:
        srv.shutdown()
        srv.server_close()


# ---- starting a server -----------------------------------------------------------

@pytest.mark.parametrize("kind", ["tcp", "unix"])
def test_starts_fake_gsbd_once(tmp_path, monkeypatch, kind):
    url = f"tcp://127.0.0.1:{free_port()}" if kind == "tcp" else f"unix://{tmp_path}/g.sock"
    monkeypatch.setenv("GSB_AUTOSTART_CMD", fake_cmd(tmp_path, url))
    assert _autostart.health(url) is None
    t0 = time.monotonic()
    doc = _autostart.ensure_server(url, timeout=15)
    assert doc["status"] == "ok" and doc["version"] == "fake"
    assert time.monotonic() - t0 >= 0.3  # it waited for the delayed server
    assert len(_autostart.started) == 1 and _autostart.started[0].pid == doc["pid"]
    # answering now: nothing more is started
    assert _autostart.ensure_server(url + "?token_file=/nonexistent")["pid"] == doc["pid"]
    assert len(_autostart.started) == 1
    log = tmp_path / "data" / "gsbd-autostart.log"
    assert "fake gsbd starting on" in log.read_text()
    # detached: a session of its own, so a Ctrl-C in this terminal leaves it alone
    assert os.getsid(doc["pid"]) == doc["pid"]
    _autostart.stop_started()
    assert _autostart.health(url) is None


def test_command_that_fails(tmp_path, monkeypatch):
    url = f"tcp://127.0.0.1:{free_port()}"
    monkeypatch.setenv("GSB_AUTOSTART_CMD", f"{shlex.quote(sys.executable)} -c "
                       "\"import sys; print('cannot bind: address in use'); sys.exit(3)\"")
    t0 = time.monotonic()
    with pytest.raises(_autostart.AutostartError) as err:
        _autostart.ensure_server(url, timeout=15)
    assert time.monotonic() - t0 < 10  # noticed the exit, did not wait out the timeout
    msg = str(err.value)
    assert "status 3" in msg and "address in use" in msg and url in msg
    assert isinstance(err.value, ConnectionError)


def test_command_not_found(monkeypatch):
    monkeypatch.setenv("GSB_AUTOSTART_CMD", "/nonexistent/gsbd")
    with pytest.raises(_autostart.AutostartError, match="could not be started"):
        _autostart.ensure_server(f"tcp://127.0.0.1:{free_port()}", timeout=5)


def test_timeout_message(monkeypatch):
    url = f"tcp://127.0.0.1:{free_port()}"
    monkeypatch.setenv("GSB_AUTOSTART_CMD",
                       f"{shlex.quote(sys.executable)} -c \"import time; time.sleep(60)\"")
    monkeypatch.setenv("GSB_AUTOSTART_TIMEOUT", "0.8")
    t0 = time.monotonic()
    with pytest.raises(_autostart.AutostartError) as err:
        _autostart.ensure_server(url)
    took = time.monotonic() - t0
    assert 0.7 <= took < 5
    assert "within 0.8 s" in str(err.value) and "GSB_AUTOSTART_TIMEOUT" in str(err.value)


def test_remote_address_is_not_started(monkeypatch):
    monkeypatch.setenv("GSB_AUTOSTART_CMD", "/bin/false")
    # health() is replaced, so no packet leaves this machine (192.0.2.1 is TEST-NET-1)
    monkeypatch.setattr(_autostart, "health", lambda url, timeout=1.0: None)
    with pytest.raises(_autostart.AutostartError, match="only starts a gsbd on this machine"):
        _autostart.ensure_server("tcp://192.0.2.1:19876")
    assert _autostart.started == []


def test_concurrent_callers_start_one(tmp_path, monkeypatch):
    url = f"unix://{tmp_path}/c.sock"
    monkeypatch.setenv("GSB_AUTOSTART_CMD", fake_cmd(tmp_path, url, delay=0.2))
    results, errors = [], []

    def call():
        try:
            results.append(_autostart.ensure_server(url, timeout=15)["pid"])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(set(results)) == 1 and len(_autostart.started) == 1


# ---- the real gsbd -----------------------------------------------------------------

def _bridge_built():
    try:
        from gsb import _lib
        return hasattr(_lib.lib, "gsb_serve") and hasattr(_lib.lib, "gsb_server_start")
    except Exception:  # noqa: BLE001
        return False


@pytest.mark.skipif(not _bridge_built(), reason="libgsb has no server (gsbd) yet")
@pytest.mark.parametrize("kind", ["unix", "tcp"])
def test_starts_real_gsbd(tmp_path, kind):
    url = f"unix://{tmp_path}/gsbd.sock" if kind == "unix" else \
        f"tcp://127.0.0.1:{free_port()}"
    doc = _autostart.ensure_server(url, timeout=60)
    assert doc["status"] == "ok"
    assert doc["version"] == gsb.__version__
    proc = _autostart.started[-1]
    X = np.random.default_rng(0).normal(size=(50, 4))
    try:
        gsb.connect(url)
        from gsb.preprocessing import StandardScaler
        remote = StandardScaler().fit_transform(X)
        gsb.connect(None)
        local = StandardScaler().fit_transform(X)
        # the started gsbd picks its own device (auto); bit-identity for one
        # backend is test_remote's business, so this allows the last bits
        np.testing.assert_allclose(remote, local, rtol=1e-12, atol=1e-14)
    finally:
        gsb.connect(None)
    # SIGTERM: gsbd drains and exits cleanly
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert _autostart.health(url) is None
