"""gsbd from Python: serve the engine to other processes and machines.

    gsb.server.serve(listen=["tcp://127.0.0.1:19876"])   # blocks until SIGINT/SIGTERM
    srv = gsb.server.start(listen=["unix:///tmp/gsbd.sock"], device="cpu")
    gsb.connect(srv.urls[0]); ...; srv.stop()             # tests, notebooks

The server is libgsb's (gsb_serve, gsb_server_start): its threads run in C,
so a server started here keeps serving while Python code runs (ctypes lets
go of the GIL during every call).  `python -m gsb.server` and the `gsbd`
console script take the same flags as `gsb serve`.
"""
import argparse
import ctypes
import json
import os
import sys

from . import _lib

DEFAULT_TCP = "tcp://127.0.0.1:19876"
LOG_LEVELS = ("debug", "info", "warn", "error")
DEVICES = ("auto", "cpu", "cuda")


def _options(listen=None, data_dir=None, token_file=None, device=None, log_file=None,
             log_level=None, max_request_mb=None, log_stderr=None, max_connections=None,
             reserved_connections=None, max_connections_per_peer=None, idle_timeout_s=None,
             memory_budget_mb=None):
    """The options JSON of gsb_server_start / gsb_serve (None: the server's default)."""
    opts = {}
    if listen is not None:
        if isinstance(listen, (str, os.PathLike)):
            listen = [listen]
        opts["listen"] = [os.fspath(u) for u in listen]
        if not opts["listen"]:
            raise ValueError("gsb.server: listen must name at least one address")
    if data_dir is not None:
        opts["data_dir"] = os.path.abspath(os.fspath(data_dir))
    if token_file is not None:
        opts["token_file"] = os.path.abspath(os.fspath(token_file))
    if device is not None:
        if device not in DEVICES:
            raise ValueError(f"gsb.server: device must be one of {DEVICES}, got {device!r}")
        opts["device"] = device
    if log_file is not None:
        opts["log_file"] = os.path.abspath(os.fspath(log_file))
    if log_level is not None:
        if log_level not in LOG_LEVELS:
            raise ValueError(f"gsb.server: log_level must be one of {LOG_LEVELS}, "
                             f"got {log_level!r}")
        opts["log_level"] = log_level
    if max_request_mb is not None:
        opts["max_request_mb"] = int(max_request_mb)
    if log_stderr is not None:
        opts["log_stderr"] = bool(log_stderr)
    limits = {"max_connections": max_connections, "reserved_connections": reserved_connections,
              "max_connections_per_peer": max_connections_per_peer,
              "idle_timeout_s": idle_timeout_s, "memory_budget_mb": memory_budget_mb}
    for key, value in limits.items():
        if value is not None:
            opts[key] = int(value)
    return json.dumps(opts)


class Server:
    """A gsbd running on background threads of this process (gsb.server.start).

    .urls: the addresses it listens on (port 0 replaced by the real port);
    .stop(): stop accepting, finish in-flight requests, close every connection.
    Also a context manager; stopped when garbage collected."""

    def __init__(self, options_json):
        handle = ctypes.c_void_p()
        _lib.check(_lib.bridge.gsb_server_start(options_json.encode(), ctypes.byref(handle)))
        self._handle = handle
        urls = []
        while True:
            u = _lib.bridge.gsb_server_url(handle, len(urls))
            if u is None:
                break
            urls.append(u.decode())
        self.urls = urls

    @property
    def url(self):
        """The first address (a Unix socket when there is one: the fastest)."""
        for u in self.urls:
            if u.startswith("unix://"):
                return u
        return self.urls[0]

    def url_of(self, scheme):
        """The first address of scheme "tcp" or "unix" (None if it listens on none)."""
        return next((u for u in self.urls if u.startswith(scheme + "://")), None)

    @property
    def running(self):
        return bool(self._handle)

    def stop(self):
        """Stop the server (idempotent); sessions connected to it get errors afterwards."""
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            _lib.bridge.gsb_server_stop(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def __del__(self):
        self.stop()

    def __repr__(self):
        return f"<gsb.server.Server {' '.join(self.urls)}{'' if self._handle else ' stopped'}>"


def start(listen=None, data_dir=None, token_file=None, device=None, log_file=None,
          log_level=None, max_request_mb=None, log_stderr=None, max_connections=None,
          reserved_connections=None, max_connections_per_peer=None, idle_timeout_s=None,
          memory_budget_mb=None):
    """Start gsbd on background threads of this process and return a Server.

    listen: a URL or a list ("tcp://127.0.0.1:0" picks a free port, "unix:///path");
    default: tcp://127.0.0.1:19876 and a Unix socket in $XDG_RUNTIME_DIR.
    data_dir: the model store (default: as the embedded engine, $GSB_DATA_DIR).
    token_file: clients must present the token in its first line.
    device: "auto" (default), "cpu" or "cuda".
    log_file (default DATA_DIR/gsbd.log), log_level ("debug", "info" (default), "warn",
    "error"), max_request_mb, max_connections, reserved_connections,
    max_connections_per_peer, idle_timeout_s, memory_budget_mb: as gsb.h and
    docs/REMOTE.md ("Limits") say.
    log_stderr: also write the log lines to stderr (default False: the server shares this
    process's stderr, which is the user's output; the lines go to log_file only)."""
    if log_stderr is None:
        log_stderr = False
    return Server(_options(listen, data_dir, token_file, device, log_file, log_level,
                           max_request_mb, log_stderr, max_connections, reserved_connections,
                           max_connections_per_peer, idle_timeout_s, memory_budget_mb))


def serve(listen=None, data_dir=None, token_file=None, device=None, log_file=None,
          log_level=None, max_request_mb=None, log_stderr=None, max_connections=None,
          reserved_connections=None, max_connections_per_peer=None, idle_timeout_s=None,
          memory_budget_mb=None):
    """Run gsbd in this process until SIGINT or SIGTERM (the body of `gsbd`): it then
    finishes in-flight requests and returns.  Arguments as for start(), except that the
    log also goes to stderr unless log_stderr=False (a foreground daemon's output)."""
    opts = _options(listen, data_dir, token_file, device, log_file, log_level,
                    max_request_mb, log_stderr, max_connections, reserved_connections,
                    max_connections_per_peer, idle_timeout_s, memory_budget_mb)
    _lib.check(_lib.bridge.gsb_serve(opts.encode()))


def _parser():
    p = argparse.ArgumentParser(
        prog="gsbd",
        description="Serve the gsb engine to other processes (gsb.connect(url), GSB_URL, "
                    "gsb_open(url)). Same as `gsb serve`.")
    p.add_argument("--listen", action="append", metavar="URL",
                   help=f"address to listen on, repeatable: tcp://HOST:PORT or "
                        f"unix:///PATH (default: {DEFAULT_TCP} and a Unix socket in "
                        f"$XDG_RUNTIME_DIR); non-loopback TCP needs --token-file")
    p.add_argument("--data-dir", metavar="DIR",
                   help="model store directory (default: $GSB_DATA_DIR, else "
                        "~/.local/share/gsb)")
    p.add_argument("--token-file", metavar="FILE",
                   help="file whose first line is the token every client must present")
    p.add_argument("--device", choices=DEVICES, help="compute device (default: auto)")
    p.add_argument("--log-file", metavar="FILE", help="log file (default: DATA_DIR/gsbd.log)")
    p.add_argument("--log-level", choices=LOG_LEVELS, help="least severe level logged "
                   "(default: info)")
    p.add_argument("--max-request-mb", type=int, metavar="MB",
                   help="bound on the bytes one request may hold (default 8192)")
    p.add_argument("--max-connections", type=int, metavar="N",
                   help="connections served at once (default 1024)")
    p.add_argument("--reserved-connections", type=int, metavar="N",
                   help="more slots at the limit, for /health, /metrics and clients with the "
                        "token or of the server's user (default 16)")
    p.add_argument("--max-connections-per-peer", type=int, metavar="N",
                   help="connections of one local user or remote address (default a quarter "
                        "of --max-connections)")
    p.add_argument("--idle-timeout", type=int, metavar="S", dest="idle_timeout_s",
                   help="close connections whose session holds nothing after S seconds idle "
                        "(default 300; 0: never)")
    p.add_argument("--memory-budget-mb", type=int, metavar="MB",
                   help="server-wide bound on request, data-handle and shared memory "
                        "(default 3/4 of the machine's memory)")
    return p


def main(argv=None):
    """`gsbd` / `python -m gsb.server`: serve until SIGINT or SIGTERM."""
    args = _parser().parse_args(argv)
    try:
        serve(listen=args.listen, data_dir=args.data_dir, token_file=args.token_file,
              device=args.device, log_file=args.log_file, log_level=args.log_level,
              max_request_mb=args.max_request_mb, max_connections=args.max_connections,
              reserved_connections=args.reserved_connections,
              max_connections_per_peer=args.max_connections_per_peer,
              idle_timeout_s=args.idle_timeout_s, memory_budget_mb=args.memory_budget_mb)
    except (OSError, ValueError, _lib.GsbError, NotImplementedError) as e:
        print(f"gsbd: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
