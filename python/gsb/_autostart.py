"""Start a local gsbd when nothing answers at the URL (GSB_AUTOSTART=1).

    from gsb import _autostart
    _autostart.ensure_server("tcp://127.0.0.1:19876")   # -> the server's /health dict

ensure_server(url) asks GET /health at url; when nothing answers and the
address is on this machine, it starts gsbd in the background (detached: it
outlives this process) and polls /health until it answers, for at most
$GSB_AUTOSTART_TIMEOUT seconds (default 20).  Failures raise AutostartError
(a ConnectionError) that says what was run, what it printed and what to do.

What it starts:
- Linux: the `gsbd` on PATH, else `python -m gsb.server` with this Python;
- Windows: gsbd inside WSL2, `wsl.exe -d $GSB_WSL_DISTRO -- gsbd` (the
  distribution's default when GSB_WSL_DISTRO is unset; $GSB_WSL_GSBD names
  another gsbd command there), through a login shell so ~/.local/bin and
  the like are on PATH.  wsl.exe stays running with gsbd, which keeps the
  distribution up; Windows forwards localhost to it.
- $GSB_AUTOSTART_CMD, when set, replaces either (a command line, split like
  a shell's words); it must start a gsbd that listens at the URL.
The default URL (tcp://127.0.0.1:19876) starts gsbd with its defaults (that
TCP address and a Unix socket); any other URL adds `--listen URL`.

The health check is plain HTTP on a socket of its own: no HTTP(S)_PROXY or
system proxy is ever consulted, so local traffic never goes to a proxy.
This module uses only the standard library (it is imported before libgsb
may be loadable, and tests drive it with fake servers).
"""
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from urllib.parse import unquote, urlsplit

DEFAULT_URL = "tcp://127.0.0.1:19876"
DEFAULT_TIMEOUT = 20.0
_TRUE = ("1", "true", "yes", "on")

_lock = threading.Lock()
#: the processes this module started (subprocess.Popen), oldest first
started = []


class AutostartError(ConnectionError):
    """gsbd could not be started, or did not answer in time."""


def enabled(environ=None):
    """True when $GSB_AUTOSTART asks for it (1, true, yes, on)."""
    env = os.environ if environ is None else environ
    return env.get("GSB_AUTOSTART", "").strip().lower() in _TRUE


def timeout_s(environ=None):
    """$GSB_AUTOSTART_TIMEOUT in seconds (default 20)."""
    env = os.environ if environ is None else environ
    raw = env.get("GSB_AUTOSTART_TIMEOUT", "").strip()
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"gsb: GSB_AUTOSTART_TIMEOUT must be a number of seconds, "
                         f"got {raw!r}") from None
    if not value > 0:
        raise ValueError(f"gsb: GSB_AUTOSTART_TIMEOUT must be > 0, got {raw!r}")
    return value


def parse_url(url):
    """("tcp", host, port) or ("unix", path) for a gsbd URL (query ignored)."""
    if url.startswith("unix://"):
        path = unquote(url[len("unix://"):].split("?", 1)[0])
        if not path.startswith("/"):
            raise ValueError(f"gsb: a unix:// URL needs an absolute path, got {url!r}")
        return ("unix", path)
    if url.startswith("tcp://"):
        parts = urlsplit(url)
        if not parts.hostname or parts.port is None:
            raise ValueError(f"gsb: a tcp:// URL needs a host and a port, got {url!r}")
        return ("tcp", parts.hostname, parts.port)
    raise ValueError(f"gsb: not a gsbd URL (tcp://HOST:PORT or unix:///PATH): {url!r}")


def base_url(url):
    """The URL without its ?query (token_file=... is the client's business)."""
    return url.split("?", 1)[0]


def is_local(url):
    """True when url is an address of this machine: a Unix socket, or TCP on a
    loopback address (the only places autostart may start a server)."""
    where = parse_url(url)
    if where[0] == "unix":
        return True
    host = where[1]
    if host == "localhost":
        return True
    try:
        import ipaddress
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _connect(where, timeout):
    if where[0] == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(timeout)
            s.connect(where[1])
        except BaseException:
            s.close()
            raise
        return s
    # create_connection: the address itself, never a proxy
    return socket.create_connection((where[1], where[2]), timeout=timeout)


def _read_response(s, limit=1 << 20):
    """(status code, body bytes) of an HTTP/1.x response on s."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > limit:
            raise ValueError("response head too large")
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    fields = lines[0].split(None, 2)
    if len(fields) < 2 or not fields[0].startswith(b"HTTP/"):
        raise ValueError(f"not an HTTP response: {lines[0][:80]!r}")
    code = int(fields[1])
    length = None
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while length is None or len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
        if len(body) > limit:
            raise ValueError("response body too large")
    return code, body if length is None else body[:length]


def health(url, timeout=1.0):
    """The /health document of the gsbd at url, or None when nothing answers
    there (refused, no such socket, timed out).  Something that answers but
    is not gsbd's /health gives {"status": "not gsbd", "detail": ...}."""
    where = parse_url(url)
    try:
        s = _connect(where, timeout)
    except OSError:
        return None
    try:
        s.settimeout(timeout)
        host = "localhost" if where[0] == "unix" else where[1]
        s.sendall(f"GET /health HTTP/1.1\r\nHost: {host}\r\nAccept: application/json\r\n"
                  f"Connection: close\r\n\r\n".encode())
        code, body = _read_response(s)
    except (OSError, ValueError) as e:
        if isinstance(e, (ConnectionResetError, BrokenPipeError, socket.timeout)):
            return None  # a server still starting, or one going away
        return {"status": "not gsbd", "detail": str(e)}
    finally:
        s.close()
    try:
        doc = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        doc = None
    if code != 200 or not isinstance(doc, dict):
        return {"status": "not gsbd", "detail": f"HTTP {code}: {body[:200]!r}"}
    return doc


def data_dir(environ=None):
    """Where the autostarted server's output goes: the model store's directory
    ($GSB_DATA_DIR, else $XDG_DATA_HOME/gsb, else ~/.local/share/gsb; on
    Windows %LOCALAPPDATA%\\gsb)."""
    env = os.environ if environ is None else environ
    if env.get("GSB_DATA_DIR"):
        return env["GSB_DATA_DIR"]
    if os.name == "nt" and env.get("LOCALAPPDATA"):
        return os.path.join(env["LOCALAPPDATA"], "gsb")
    xdg = env.get("XDG_DATA_HOME", "")
    if xdg.startswith("/"):
        return os.path.join(xdg, "gsb")
    return os.path.join(os.path.expanduser("~"), ".local", "share", "gsb")


def server_command(url, os_name=None, environ=None):
    """The command that starts a gsbd listening at url (a list of strings)."""
    env = os.environ if environ is None else environ
    os_name = os_name or os.name
    override = env.get("GSB_AUTOSTART_CMD", "").strip()
    if override:
        return shlex.split(override, posix=os_name != "nt")
    where = parse_url(url)
    args = [] if base_url(url) == DEFAULT_URL else ["--listen", base_url(url)]
    if os_name == "nt":
        if where[0] == "unix":
            raise AutostartError(
                f"gsb: cannot autostart a gsbd for {url} from Windows: gsbd in WSL2 is "
                f"reached over TCP; use GSB_URL=tcp://127.0.0.1:19876")
        distro = env.get("GSB_WSL_DISTRO", "").strip()
        gsbd = env.get("GSB_WSL_GSBD", "").strip() or "gsbd"
        cmd = ["wsl.exe"] + (["-d", distro] if distro else [])
        # a login shell reads ~/.profile, which puts ~/.local/bin (pip --user) on PATH
        return cmd + ["--exec", "sh", "-lc", 'exec "$0" "$@"', gsbd] + args
    gsbd = shutil.which("gsbd", path=env.get("PATH"))
    if gsbd:
        return [gsbd] + args
    return [sys.executable, "-m", "gsb.server"] + args


def _tail(path, n=20):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 8192))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-n:])


def _spawn(cmd, log_path):
    """Start cmd detached from this process (own session / process group, no
    console window), output appended to log_path."""
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    with open(log_path, "ab") as log:
        log.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} autostart: "
                  f"{' '.join(shlex.quote(c) for c in cmd)}\n".encode())
        log.flush()
        kwargs = dict(stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                      close_fds=True)
        if os.name == "nt":
            kwargs["creationflags"] = (subprocess.CREATE_NEW_PROCESS_GROUP
                                       | subprocess.CREATE_NO_WINDOW)
        else:
            kwargs["start_new_session"] = True  # Ctrl-C in this terminal leaves it alone
        return subprocess.Popen(cmd, **kwargs)


class _FileLock:
    """An advisory lock on a file across processes (POSIX), so two programs
    autostarting at once start one gsbd; a no-op where fcntl is missing."""

    def __init__(self, path):
        self.path = path
        self.fd = None

    def __enter__(self):
        try:
            import fcntl
        except ImportError:
            return self
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)  # releases the lock
            self.fd = None
        return False


def ensure_server(url=None, timeout=None):
    """Make sure a gsbd answers at url (default: $GSB_URL, else the default
    TCP address): returns its /health document, starting a local gsbd first
    when nothing answers.  Raises AutostartError when the address is not on
    this machine, when gsbd exits, or when it does not answer within timeout
    seconds (default $GSB_AUTOSTART_TIMEOUT, else 20)."""
    url = url or os.environ.get("GSB_URL") or DEFAULT_URL
    doc = health(url)
    if doc is not None:
        return doc
    if not is_local(url):
        raise AutostartError(
            f"gsb: nothing answers at {base_url(url)}, and autostart only starts a gsbd on "
            f"this machine (a Unix socket or a loopback address). Start gsbd on that host "
            f"(`gsb service install` keeps it running) or check the URL.")
    limit = timeout_s() if timeout is None else float(timeout)
    directory = data_dir()
    log_path = os.path.join(directory, "gsbd-autostart.log")
    with _lock, _FileLock(os.path.join(directory, "autostart.lock")):
        doc = health(url)  # another thread or process may have started it meanwhile
        if doc is not None:
            return doc
        cmd = server_command(url)
        shown = " ".join(shlex.quote(c) for c in cmd)
        try:
            proc = _spawn(cmd, log_path)
        except OSError as e:
            hint = ("Is WSL installed (`wsl --status`)?" if os.name == "nt" else
                    "Install gsb's server (pip install gsb gives a gsbd command) or set "
                    "GSB_AUTOSTART_CMD.")
            raise AutostartError(f"gsb: GSB_AUTOSTART=1 but gsbd could not be started for "
                                 f"{base_url(url)}: `{shown}`: {e}. {hint}") from None
        started.append(proc)
        deadline = time.monotonic() + limit
        pause = 0.02
        while True:
            remaining = deadline - time.monotonic()
            doc = health(url, timeout=max(0.05, min(1.0, remaining)))
            if doc is not None:
                return doc
            code = proc.poll()
            if code not in (None, 0):
                doc = health(url)  # it lost a race to another gsbd, which answers
                if doc is not None:
                    return doc
                raise AutostartError(
                    f"gsb: GSB_AUTOSTART=1: gsbd for {base_url(url)} exited with status "
                    f"{code} before answering (`{shown}`). Its output ({log_path}):\n"
                    f"{_tail(log_path)}")
            # code 0: the command daemonised (gsbd --daemon): keep asking /health
            if remaining <= 0:
                raise AutostartError(
                    f"gsb: GSB_AUTOSTART=1: started gsbd for {base_url(url)} (`{shown}`, "
                    f"pid {proc.pid}) but GET /health did not answer within {limit:g} s. "
                    f"It may still be starting (a first CUDA start can be slow: raise "
                    f"GSB_AUTOSTART_TIMEOUT), or it failed: see {log_path} and the server's "
                    f"own log (`gsb logs`). Last output:\n{_tail(log_path)}")
            time.sleep(min(pause, max(0.0, remaining)))
            pause = min(pause * 2, 0.25)


def stop_started(timeout=10.0):
    """Stop the servers this process started (SIGTERM, then SIGKILL after
    timeout seconds); for tests and notebooks."""
    while started:
        proc = started.pop()
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
