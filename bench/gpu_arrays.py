#!/usr/bin/env python3
"""gpu_arrays.py - GPU arrays and out-of-core fits on the device (issue 17).

    python3 bench/gpu_arrays.py [--cases RE] [--scale S] [--repeats R] [--json FILE] [--trace]
    python3 bench/gpu_arrays.py --device cpu --scale 0.05   (no GPU: the out-of-core cases
                                                           on the CPU backend, times only)

Needs a GPU and CuPy; gsb as the tests find it (GSB_LIBRARY, PYTHONPATH).  The cases
(--cases selects by regular expression, as bench/compare.py's):

  GPUArrays KMeans(100) 1M x 64 ...   KMeans fitted on a CuPy array and on the same data
                                      in numpy: the fit's time and the bytes the engine
                                      uploaded (X from CuPy: none, the model's centres only)
  OutOfCore <estimator> ...           a fit whose X (float32) is 1.5x the memory cap
                                      (gsb.set_config(gpu_memory_cap=...)), so X streams
                                      from host memory in batches: the achieved rate (bytes
                                      the engine copied / fit time) against the pinned
                                      host-to-device bandwidth measured with CuPy; X in
                                      pageable memory (numpy) and page-locked (gsb.empty)

Goal: out-of-core from page-locked memory at >= 80% of the pinned bandwidth.  Pageable
X goes through a memcpy into pinned staging first, bounded by host memory bandwidth;
KMeans page-locks X for its many passes (cudaHostRegister), so its later passes are DMAs.
The rate is the bytes copied over the whole fit's time (validation, setup and the solve
included).  The in-memory time is the median of the same repeats (the first fit of a size
also grows the GPU's memory pool).  --scale multiplies the row counts (0.1 for a quick
run).  --trace sets GSB_STREAM_TRACE=1: each streamed fit's ring prints one line to stderr
(the link's busy time and rate, the compute per batch, the host's staging: which of them
bounds the fit; docs/CUDA.md, "Out of core"), and the table gains the time from the fit's
start (its entry into the engine) to the ring's open, the ring's open-to-close time
(medians over the repeats) and the copied bytes over it: the stream alone, without the
validation, setup and solve around it; the timings of a traced run carry the events'
small cost.
"""
import argparse
import contextlib
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time

import numpy as np

import gsb
from gsb.cluster import KMeans
from gsb.decomposition import PCA
from gsb.linear_model import LinearRegression

GIB = float(1 << 30)


def cupy_or_exit():
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no CUDA device")
        return cupy
    except Exception as e:  # noqa: BLE001 - any reason means: not here
        sys.exit(f"gpu_arrays.py needs CuPy and a GPU ({e})")


def h2d_bandwidth(cupy, nbytes=256 << 20, repeats=10, pinned=True):
    """Host-to-device bytes/s of one cudaMemcpyAsync (median of repeats)."""
    if pinned:
        mem = cupy.cuda.alloc_pinned_memory(nbytes)
        host = np.frombuffer(mem, dtype=np.uint8, count=nbytes)
    else:
        host = np.empty(nbytes, dtype=np.uint8)
    host[:] = 1
    dev = cupy.empty(nbytes, dtype=cupy.uint8)
    stream = cupy.cuda.Stream(non_blocking=True)
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    for _ in range(repeats + 1):
        start.record(stream)
        cupy.cuda.runtime.memcpyAsync(dev.data.ptr, host.ctypes.data, nbytes,
                                      cupy.cuda.runtime.memcpyHostToDevice, stream.ptr)
        end.record(stream)
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end) / 1e3)
    return nbytes / statistics.median(times[1:])


def copies():
    """The engine's host-to-device counters (a GPU session; zeros on the CPU backend)."""
    return gsb.session_info().get("copies", {"h2d_bytes": 0, "h2d_count": 0})


def timed_fit(make, X, y, repeats):
    """Median fit time and the bytes / copies uploaded per fit."""
    times, moved, count = [], [], []
    for _ in range(repeats):
        before = copies()
        t = time.perf_counter()
        make().fit(X, y)
        times.append(time.perf_counter() - t)
        after = copies()
        moved.append(after["h2d_bytes"] - before["h2d_bytes"])
        count.append(after["h2d_count"] - before["h2d_count"])
    return statistics.median(times), statistics.median(moved), statistics.median(count)


@contextlib.contextmanager
def stderr_into(lines):
    """Collect what the process writes to fd 2 (the C library's trace lines) into lines,
    and write it on to stderr afterwards."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode(errors="replace")
            sys.stderr.write(text)
            sys.stderr.flush()
            lines.extend(text.splitlines())


def ring_seconds(lines, what=r"ring open to close"):
    """The median over fits of the ring's open-to-close time (GSB_STREAM_TRACE lines), or
    with what="call start to ring open" of the time from the call's start to the ring's
    open (validation, plan, setup)."""
    found = [float(m.group(1)) / 1e3 for m in
             (re.search(what + r" ([0-9.]+) ms", x) for x in lines
              if x.startswith("gsb stream trace:")) if m]
    return statistics.median(found) if found else float("nan")


def data(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d), dtype=np.float32)
    X[:, 0] += 3 * (np.arange(n) % 4)
    y = (X @ np.linspace(-1, 1, d, dtype=np.float32)).astype(np.float32)
    return X, y


def case_cupy_kmeans(cupy, args, rows):
    n, d = int(1_000_000 * args.scale), 64
    X, _ = data(n, d)
    Xd = cupy.asarray(X)
    make = lambda: KMeans(n_clusters=100, n_init=1, max_iter=20, tol=0.0,  # noqa: E731
                          init="random", random_state=0)
    name = f"GPUArrays KMeans(100) {n // 1000}k x {d}, 20 it"
    for label, Xin in (("numpy", X), ("cupy", Xd)):
        t, moved, _ = timed_fit(make, Xin, None, args.repeats)
        rows.append({"case": name, "input": label, "time_s": t, "x_gib": X.nbytes / GIB,
                     "uploaded_gib": moved / GIB})


def case_out_of_core(args, rows, pinned_bw):
    gsb.set_config(device=args.device)
    specs = [
        ("LinearRegression", int(8_000_000 * args.scale), 64,
         lambda: LinearRegression(), True),
        ("PCA(8)", int(8_000_000 * args.scale), 64, lambda: PCA(n_components=8), False),
        ("KMeans(16) init=random, 10 it", int(4_000_000 * args.scale), 64,
         lambda: KMeans(n_clusters=16, n_init=1, max_iter=10, tol=0.0, init="random",
                        random_state=0), False),
    ]
    for est, n, d, make, with_y in specs:
        name = f"OutOfCore {est} {n // 1000}k x {d}"
        if args.cases and not re.search(args.cases, name):
            continue
        X, y = data(n, d)
        target = y if with_y else None
        gsb.set_config(gpu_memory_cap=None)
        # the same fit in memory, for reference (median: the first also grows the pool)
        t_mem, _, _ = timed_fit(make, X, target, args.repeats)
        cap = int(X.nbytes / 1.5)
        gsb.set_config(gpu_memory_cap=cap)
        Xp = gsb.empty(X.shape, X.dtype)  # page-locked: the session's arena
        np.copyto(Xp, X)
        for label, Xin in (("pageable", X), ("page-locked", Xp)):
            traced = []
            if args.trace:
                print(f"# {name}, X {label}: trace lines of {args.repeats} fits",
                      file=sys.stderr, flush=True)
            with stderr_into(traced) if args.trace else contextlib.nullcontext():
                t, moved, count = timed_fit(make, Xin, target, args.repeats)
            rate = moved / t if pinned_bw else float("nan")
            ring_s = ring_seconds(traced)
            rows.append({"case": name, "input": label, "time_s": t, "in_memory_s": t_mem,
                         "x_gib": X.nbytes / GIB, "cap_gib": cap / GIB,
                         "uploaded_gib": moved / GIB, "copies": count,
                         "rate_gbs": rate / 1e9,
                         "pinned_gbs": pinned_bw / 1e9 if pinned_bw else float("nan"),
                         "of_pinned": rate / pinned_bw if pinned_bw else float("nan"),
                         "ring_s": ring_s, "ring_gbs": moved / ring_s / 1e9,
                         "to_ring_s": ring_seconds(traced, "call start to ring open")})
        del Xp
        gsb.set_config(gpu_memory_cap=None)


def print_table(rows, pinned_bw, pageable_bw):
    if pinned_bw:
        print(f"\npinned host-to-device: {pinned_bw / 1e9:.1f} GB/s; pageable: "
              f"{pageable_bw / 1e9:.1f} GB/s ({gsb.session_info().get('gpu')})\n")
    else:
        print("\nCPU backend (streamed under the cap, compared with the fit in memory)\n")
    # with --trace: the ring's open-to-close (the stream alone) and the copied bytes over it
    ring = any(not math.isnan(r.get("ring_s", float("nan"))) for r in rows)
    print("| case | X in | fit s | in memory s | X GiB | cap GiB | copied GiB | rate GB/s | "
          "% of pinned |" + (" to ring s | ring s | ring GB/s |" if ring else ""))
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|---:|" if ring else ""))
    for r in rows:
        print(f"| {r['case']} | {r['input']} | {r['time_s']:.3f} | "
              f"{r.get('in_memory_s', float('nan')):.3f} | {r['x_gib']:.2f} | "
              f"{r.get('cap_gib', float('nan')):.2f} | {r['uploaded_gib']:.3f} | "
              f"{r.get('rate_gbs', float('nan')):.1f} | "
              f"{100 * r.get('of_pinned', float('nan')):.0f} |" +
              (f" {r.get('to_ring_s', float('nan')):.4f} |"
               f" {r.get('ring_s', float('nan')):.3f} | "
               f"{r.get('ring_gbs', float('nan')):.1f} |" if ring else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="", help="regular expression over case names")
    ap.add_argument("--scale", type=float, default=1.0, help="row-count multiplier")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", help="also write the rows as JSON")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--trace", action="store_true",
                    help="GSB_STREAM_TRACE=1: one line per streamed fit's ring on stderr")
    args = ap.parse_args()
    if args.trace:
        os.environ["GSB_STREAM_TRACE"] = "1"  # read by the CUDA ring at each open
    rows, pinned_bw, pageable_bw = [], None, None
    if args.device == "cuda":
        cupy = cupy_or_exit()
        gsb.set_config(device="cuda")
        pinned_bw, pageable_bw = h2d_bandwidth(cupy), h2d_bandwidth(cupy, pinned=False)
        if not args.cases or re.search(args.cases, "GPUArrays KMeans"):
            case_cupy_kmeans(cupy, args, rows)
    if not args.cases or re.search(args.cases, "OutOfCore LinearRegression PCA KMeans"):
        case_out_of_core(args, rows, pinned_bw)
    print_table(rows, pinned_bw, pageable_bw)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"pinned_gbs": pinned_bw / 1e9, "pageable_gbs": pageable_bw / 1e9,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
