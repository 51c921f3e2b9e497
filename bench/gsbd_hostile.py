#!/usr/bin/env python3
"""gsbd under hostile load: the probes of issue 21, as an operator runs them.

    python3 bench/gsbd_hostile.py malformed --url tcp://127.0.0.1:19876 --pid PID -n 3000
    python3 bench/gsbd_hostile.py idle --url tcp://127.0.0.1:19876 -n 1100
    python3 bench/gsbd_hostile.py loopback --mb 2048        # raw TCP loopback, no gsb

malformed: N connections, THREADS at a time, each sending one of the malformed
things a careless or hostile client sends (random bytes, bad headers, heads that
are not JSON, frames cut short, heads and inline sections of up to 4 and 16 MiB
of garbage); prints the server's RSS (from /proc/PID/status) before, after and
after a pause.
idle: opens N connections that each send HELLO and then sit idle, then says what
/health and a new connection get (the cap's behaviour); holds them until Enter
or --hold seconds.
loopback: the bytes/s one TCP stream carries over 127.0.0.1 on this machine
(sender and receiver threads in this process, 8 MiB sends, the same socket
buffers gsbd asks for): the baseline for gsb's TCP upload rate.

Frames are built here with struct (docs/PROTOCOL.md), so nothing of gsb is
imported: what the server sees is exactly what this script chose.
"""
import argparse
import json
import mmap
import os
import random
import socket
import struct
import sys
import threading
import time

MAGIC = b"GSB1"
HELLO, REQUEST, CHUNK = 1, 3, 8


def frame(ftype, req_id, head=b"", body=b"", length=None, head_len=None, flags=0):
    length = len(head) + len(body) if length is None else length
    head_len = len(head) if head_len is None else head_len
    return MAGIC + struct.pack("<HHQQII", 1, ftype, req_id, length, head_len, flags) + head + body


def hello_frame(token=None):
    h = {"versions": [1, 1], "client": "gsbd_hostile", "features": ["chunks"]}
    if token:
        h["token"] = token
    return frame(HELLO, 1, json.dumps(h).encode())


def connect(url, timeout=10.0):
    if url.startswith("tcp://"):
        host, port = url[6:].rsplit(":", 1)
        s = socket.create_connection((host, int(port)), timeout=timeout)
    elif url.startswith("unix://"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(url[7:])
    else:
        raise SystemExit(f"unknown URL {url!r}: tcp://HOST:PORT or unix:///PATH")
    return s


def recv_frame(s):
    """(type, head dict or None) of the next frame, or (None, why)."""
    buf = b""
    try:
        while len(buf) < 32:
            k = s.recv(32 - len(buf))
            if not k:
                return None, "closed" if not buf else "closed mid-header"
            buf += k
        _, ftype, _, length, head_len, _ = struct.unpack("<HHQQII", buf[4:32])
        body = b""
        while len(body) < length:
            k = s.recv(min(1 << 20, length - len(body)))
            if not k:
                return None, "closed mid-frame"
            body += k
    except OSError as e:
        return None, type(e).__name__
    head = json.loads(body[:head_len]) if head_len else None
    return ftype, head


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def garbage(rng, n):
    return rng.randbytes(n)


def malformed_one(url, rng, kind):
    """One malformed connection of the given kind; the server must answer or close."""
    s = connect(url)
    try:
        if kind == 0:    # not our protocol at all
            s.sendall(garbage(rng, rng.randrange(4, 4096)))
        elif kind == 1:  # our magic, random header fields and bytes
            s.sendall(MAGIC + garbage(rng, 28 + rng.randrange(0, 2048)))
        elif kind == 2:  # HELLO whose head is garbage of up to 4 MiB
            n = rng.randrange(1 << 16, 4 << 20)
            s.sendall(frame(HELLO, 1, garbage(rng, n)))
        elif kind == 3:  # a REQUEST head of up to 4 MiB that is not JSON
            s.sendall(hello_frame())
            recv_frame(s)
            n = rng.randrange(1 << 16, 4 << 20)
            s.sendall(frame(REQUEST, 2, garbage(rng, n)))
        elif kind == 4:  # an inline section of up to 16 MiB under a head that lies about it
            s.sendall(hello_frame())
            recv_frame(s)
            n = rng.randrange(1 << 20, 16 << 20)
            head = json.dumps({"op": "data.put", "arrays": [
                {"dtype": "float64", "shape": [n, 4], "at": "inline", "offset": 0}]}).encode()
            s.sendall(frame(REQUEST, 2, head, garbage(rng, n)))
        elif kind == 5:  # a frame announced big and cut short
            s.sendall(hello_frame())
            recv_frame(s)
            s.sendall(frame(REQUEST, 2, length=4 << 20, head_len=4 << 20)[:32]
                      + garbage(rng, rng.randrange(0, 1 << 20)))
        s.shutdown(socket.SHUT_WR)
        recv_frame(s)   # an ERROR, or EOF
    except OSError:
        pass            # reset by the server: also an answer
    finally:
        s.close()


def cmd_malformed(a):
    rng0 = random.Random(a.seed)
    before = rss_kb(a.pid) if a.pid else -1
    todo = list(range(a.n))
    lock = threading.Lock()
    done = [0]

    def worker(seed):
        rng = random.Random(seed)
        while True:
            with lock:
                if not todo:
                    return
                todo.pop()
            malformed_one(a.url, rng, rng.randrange(6))
            with lock:
                done[0] += 1

    t0 = time.time()
    ts = [threading.Thread(target=worker, args=(rng0.random(),)) for _ in range(a.threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    dt = time.time() - t0
    after = rss_kb(a.pid) if a.pid else -1
    time.sleep(a.settle)
    settled = rss_kb(a.pid) if a.pid else -1
    up = health(a.url)
    print(f"{done[0]} malformed connections in {dt:.1f} s ({a.threads} at a time); "
          f"server RSS before {before / 1024:.1f} MB, right after {after / 1024:.1f} MB, "
          f"{a.settle:g} s later {settled / 1024:.1f} MB; /health: {up}")


def health(url):
    try:
        s = connect(url, timeout=10)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while True:
            k = s.recv(65536)
            if not k:
                break
            data += k
        s.close()
        line = data.split(b"\r\n", 1)[0].decode(errors="replace")
        body = data.split(b"\r\n\r\n", 1)[1].decode(errors="replace").strip() if b"\r\n\r\n" in data else ""
        return f"{line} {body[:200]}"
    except OSError as e:
        return f"no answer ({type(e).__name__}: {e})"


def cmd_idle(a):
    socks, refused = [], {}
    for i in range(a.n):
        try:
            s = connect(a.url)
            s.sendall(hello_frame(a.token))
            t, head = recv_frame(s)
            if t == 2:
                socks.append(s)
                continue
            why = head.get("message", "?") if isinstance(head, dict) else head
            refused[why] = refused.get(why, 0) + 1
            s.close()
        except OSError as e:
            refused[type(e).__name__] = refused.get(type(e).__name__, 0) + 1
    print(f"{len(socks)} idle logged-in connections held, {a.n - len(socks)} refused")
    for why, k in refused.items():
        print(f"  {k} x {why}")
    print(f"/health now: {health(a.url)}")
    try:
        s = connect(a.url)
        s.sendall(hello_frame(a.token))
        t, head = recv_frame(s)
        print("a new login now:", "WELCOME" if t == 2 else f"refused: {head}")
        s.close()
    except OSError as e:
        print(f"a new login now: {type(e).__name__}: {e}")
    if a.hold > 0:
        time.sleep(a.hold)
    for s in socks:
        s.close()


def cmd_loopback(a):
    """One TCP stream over 127.0.0.1: a sender thread, a receiver thread."""
    total = a.mb << 20
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    port = ls.getsockname()[1]
    got = [0]

    def receiver():
        c, _ = ls.accept()
        if a.fresh:  # into one fresh mapping of the whole size, as gsbd receives a put
            dest = mmap.mmap(-1, total)
            view = memoryview(dest)
        else:        # into one reused 8 MiB buffer: the network path alone
            view = memoryview(bytearray(8 << 20))
        while True:
            off = got[0] if a.fresh else 0
            k = c.recv_into(view[off:off + (8 << 20)])
            if not k:
                break
            got[0] += k
        c.close()

    t = threading.Thread(target=receiver)
    t.start()
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    chunk = memoryview(bytearray(os.urandom(1 << 20)) * 8)
    t0 = time.perf_counter()
    sent = 0
    while sent < total:
        n = min(len(chunk), total - sent)
        s.sendall(chunk[:n])
        sent += n
    s.shutdown(socket.SHUT_WR)
    t.join()
    dt = time.perf_counter() - t0
    s.close()
    ls.close()
    into = "fresh memory" if a.fresh else "a reused 8 MiB buffer"
    print(f"raw TCP loopback into {into}: {got[0] / 2**20:.0f} MiB in {dt:.2f} s = {got[0] / dt / 1e6:.0f} MB/s")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("malformed")
    m.add_argument("--url", required=True)
    m.add_argument("--pid", type=int, help="the server's pid, for its RSS")
    m.add_argument("-n", type=int, default=3000)
    m.add_argument("--threads", type=int, default=16)
    m.add_argument("--seed", type=int, default=1)
    m.add_argument("--settle", type=float, default=5.0)
    i = sub.add_parser("idle")
    i.add_argument("--url", required=True)
    i.add_argument("-n", type=int, default=1100)
    i.add_argument("--token")
    i.add_argument("--hold", type=float, default=0)
    lb = sub.add_parser("loopback")
    lb.add_argument("--mb", type=int, default=2048)
    lb.add_argument("--fresh", action="store_true",
                    help="receive into fresh memory (page faults included), not a reused buffer")
    a = p.parse_args(argv)
    {"malformed": cmd_malformed, "idle": cmd_idle, "loopback": cmd_loopback}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
