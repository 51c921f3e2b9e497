"""The process-wide session: opened lazily, embedded by default.

gsb.set_config(device="auto"|"cpu"|"cuda"|"cuda:all"|...) or $GSB_DEVICE picks the device of
the embedded engine, gsb.set_config(gpu_memory_cap=...) or $GSB_GPU_MEMORY_CAP
the memory it may plan with (as on a smaller GPU: larger X stream from host
memory); gsb.connect(url) or $GSB_URL points at a gsbd server
("tcp://host:port" or "unix:///path/to/socket").  Changing any of these opens
a fresh session for models created afterwards; existing models (and data
handles, arena arrays) keep the session they were made on.
gsb.set_config(output_type=...) picks the array type of results (gsb._output).
"""
import ctypes
import json
import os
import re
import threading

from . import _autostart, _lib, _output

_DEVICES = ("auto", "cpu", "cuda")
# several devices in one session (docs/MULTIGPU.md): "cuda:all", "cuda:0,1", "cuda:1";
# "cpu:N" is the test mode (N ranks on the CPU, the same multi-device code path)
_DEVICE_SET = re.compile(r"^(cuda:(all|\d+(,\d+)*)|cpu:\d+)$")
_DEVICES_TEXT = "'auto', 'cpu', 'cuda', 'cuda:all', 'cuda:I,J,...' or 'cpu:N'"


def _check_device(device):
    if device in _DEVICES or (isinstance(device, str) and _DEVICE_SET.match(device)):
        return device
    raise ValueError(f"gsb: device must be one of {_DEVICES_TEXT}, got {device!r}")
_REMOTE = ("tcp://", "unix://")
_lock = threading.RLock()
# url: None = $GSB_URL if set, else embedded; "" = embedded (gsb.connect(None))
_config = {"device": None, "url": None, "gpu_memory_cap": None}
_current = None
_UNSET = object()
_SIZE = re.compile(r"^\s*(\d+(\.\d*)?|\.\d+)\s*([KMGT]?)(i?B)?\s*$", re.IGNORECASE)


GsbConnectionError = _lib.GsbConnectionError
GsbAuthError = _lib.GsbAuthError


def _where(url):
    """Where the URL came from, for error messages."""
    if _config["url"] is None and os.environ.get("GSB_URL", "").split("?")[0] == \
            url.split("?")[0]:
        return "$GSB_URL"
    return "gsb.connect()"


def _connection_error(url, status, message):
    """The engine's words (they name the URL and the reason), then what to do from Python
    in place of the engine's C-oriented hint (after its dash)."""
    base = url.split("?")[0]
    message = message.split(" \u2014 ")[0]
    if base not in message:
        message = f"{base}: {message}"
    message = message.rstrip(". ")
    back = ("unset GSB_URL (or call gsb.connect(None))" if _where(url) == "$GSB_URL"
            else "call gsb.connect(None)")
    origin = f" [URL from {_where(url)}]"
    if status == _lib.EPARAM:  # the handshake's verdict on the token
        message = message.split(": pass ")[0]
        return GsbAuthError(
            f"gsb: {message}.{origin} Pass the server's token with gsb.connect(url, "
            f"token_file=PATH) (or set $GSB_TOKEN_FILE or $GSB_TOKEN), or {back} to use the "
            f"embedded engine.")
    if status == _lib.EUNSUPPORTED:
        return GsbConnectionError(
            f"gsb: {message}.{origin} Use a gsbd of the same version as this gsb "
            f"({_lib.version()}), or {back} to use the embedded engine.")
    start = "gsbd" if base == "tcp://127.0.0.1:19876" else f"gsbd --listen {base}"
    running = "" if "is gsbd running" in message.lower() else " Is gsbd running there?"
    return GsbConnectionError(
        f"gsb: {message}.{origin}{running} Start it with `{start}` (or `gsb serve --listen "
        f"{base}`; GSB_AUTOSTART=1 starts one on this machine when needed), check the URL, "
        f"or {back} to use the embedded engine.")


class Session:
    """An open gsb session (a handle owned by the engine)."""

    def __init__(self, url):
        self.url = url
        self.remote = url.startswith(_REMOTE)
        handle = ctypes.c_void_p()
        status = _lib.lib.gsb_open(url.encode(), ctypes.byref(handle))
        if status == _lib.EIO and self.remote and _autostart.enabled():
            # GSB_AUTOSTART=1: start a local gsbd if nothing answers there (raises
            # AutostartError, a ConnectionError saying what it ran, when that fails)
            _autostart.ensure_server(url)
            status = _lib.lib.gsb_open(url.encode(), ctypes.byref(handle))
        if status != _lib.OK:
            message = (_lib.lib.gsb_errmsg() or b"").decode("utf-8", "replace")
            if self.remote and status in (_lib.EIO, _lib.EPARAM, _lib.EUNSUPPORTED,
                                          _lib.ENOTFOUND):
                raise _connection_error(url, status, message) from None
            raise _lib._exception_for(status, message)
        self.handle = handle

    def info(self):
        """gsb_session_info as a dict: the engine (embedded) or the server's /health
        document plus the transport in use (remote)."""
        out = ctypes.c_void_p()
        _lib.check(_lib.bridge.gsb_session_info(self.handle, ctypes.byref(out)))
        return json.loads(_lib.take_string(out))

    def __repr__(self):
        return f"<gsb session {self.url}>"

    def __del__(self, _close=_lib.lib.gsb_close):
        # _close is bound at definition: module globals may be gone at exit
        handle = getattr(self, "handle", None)
        if handle:
            _close(handle)
            self.handle = None


def _device():
    return _check_device(_config["device"] or os.environ.get("GSB_DEVICE", "auto"))


def _url():
    url = _config["url"]
    if url is None:
        url = os.environ.get("GSB_URL")
    if url:
        return url
    cap = _config["gpu_memory_cap"]
    return f"local?device={_device()}" + (f"&memory_cap={cap}" if cap else "")


def _memory_cap(value):
    """gpu_memory_cap as the engine's URL parameter: bytes (an int) or a size such as
    '4G', '512M' (powers of 1024); 0 / False / '' removes the cap."""
    if value is None or value is False or value == 0 or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"gsb: gpu_memory_cap must be a number of bytes or a size such as "
                        f"'4G', got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"gsb: gpu_memory_cap must be positive, got {value}")
        return str(value)
    if not _SIZE.match(value):
        raise ValueError(f"gsb: gpu_memory_cap {value!r} is not a size (examples: "
                         f"1073741824, '512M', '1.5G')")
    return value.strip().replace(" ", "")


def get_session():
    """The session new models are created on (opened on first use)."""
    global _current
    with _lock:
        url = _url()
        if _current is None or _current.url != url:
            _current = Session(url)
        return _current


def set_config(device=None, output_type=_UNSET, gpu_memory_cap=_UNSET):
    """Configure gsb (arguments left out keep their setting):

    device: the embedded engine's device, "auto" (default), "cpu" or "cuda"; or several
        GPUs, "cuda:all" or "cuda:0,1" (fits split their rows across them where the
        estimator can: docs/MULTIGPU.md), and "cpu:N", that path on N CPU ranks (tests).
    output_type: the type of results and fitted attributes: "numpy" (the default, also
        None), "input" (the type of the call's input: CuPy in, CuPy out), "cupy", "torch",
        "numba" or "pandas".
    gpu_memory_cap: the device memory the embedded engine plans with, in bytes or as
        '4G', '512M' (None or 0: no cap beyond the GPU's free memory; default
        $GSB_GPU_MEMORY_CAP).  A fit whose X exceeds it streams X from host memory where
        the estimator can (docs/CUDA.md).  For a gsbd, set $GSB_GPU_MEMORY_CAP where it
        runs."""
    if device is not None:
        _config["device"] = _check_device(device)
    if output_type is not _UNSET:
        _output.set_output_type(output_type)
    if gpu_memory_cap is not _UNSET:
        _config["gpu_memory_cap"] = _memory_cap(gpu_memory_cap)


def get_config():
    url = _config["url"]
    if url is None:
        url = os.environ.get("GSB_URL")
    cap = _config["gpu_memory_cap"]
    return {"device": _device(), "url": url or None, "output_type": _output.get_output_type(),
            "gpu_memory_cap": cap if cap is not None else
            os.environ.get("GSB_GPU_MEMORY_CAP") or None}


def with_token_file(url, token_file):
    """url with ?token_file=PATH (or &token_file=) appended."""
    if token_file is None:
        return url
    if not url.startswith(_REMOTE):
        raise ValueError(f"gsb: token_file is for gsbd URLs (tcp://, unix://), not {url!r}")
    token_file = os.fspath(token_file)
    if not os.path.isfile(token_file):
        raise FileNotFoundError(f"gsb: token file {token_file!r} does not exist")
    return f"{url}{'&' if '?' in url else '?'}token_file={os.path.abspath(token_file)}"


def connect(url, token_file=None):
    """Use the gsbd server at url ("tcp://host:port", "unix:///path") for models created
    from now on; None goes back to the embedded engine (even when $GSB_URL is set).

    token_file: a file whose first line is the server's token (for servers started
    with --token-file).  The connection is made now (a new session each call), so a
    wrong URL or token fails here with ConnectionError, and the previous session
    stays in use.  Returns the session."""
    global _current
    if url is None:
        with _lock:
            _config["url"] = ""
        return None
    url = with_token_file(str(url), token_file)
    with _lock:
        # always a fresh session: after a server restart, connecting again is the fix
        session = Session(url)  # raises before anything changes
        _current = session
        _config["url"] = url
        return _current


def session_info():
    """The current session as a dict (see Session.info)."""
    return get_session().info()
