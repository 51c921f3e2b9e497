#!/usr/bin/env python3
"""multigpu.py - fits split across the GPUs of one machine (issue 18, docs/MULTIGPU.md).

    python3 bench/multigpu.py [--scale S] [--repeats R] [--json FILE]
    python3 bench/multigpu.py --one cpu --rank1 cpu:1 --multi cpu:2 --scale 0.01
                                        (no GPU: the same path on CPU ranks, times only)
    python3 bench/multigpu.py --cases kNN   (the cases whose names match a regex)

Needs gsb as the tests find it (GSB_LIBRARY, PYTHONPATH), the CUDA plugin, and NCCL for
the multi-device sessions ($GSB_NCCL_LIBRARY where it is not on the loader's path).
For each case, the fit's wall time on:
  cuda      the one-GPU session (the baseline);
  cuda:0    the multi-device path on one GPU (NCCL with one rank: the path's overhead);
  cuda:all  every visible GPU, the same data (strong scaling) and, for weak scaling,
            the data grown with the GPU count (rows per GPU as the baseline's).
Cases (the issue's sizes; --scale multiplies the rows, 0.25 for a quick run):
  KMeans(100) 4M x 64 (explicit init, 20 Lloyd iterations: tol=0, max_iter=20),
  LinearRegression 4M x 256, PCA(16) 4M x 256, and kNN 1M x 64 (NearestNeighbors,
  kneighbors of 10k queries, k=10: the index split across the GPUs, each GPU's top k
  merged on the host), and RandomForestClassifier 1M x 32 (32 trees, max_depth 10: the
  trees shared out, each GPU growing its share on all the rows).
Fit times include the upload of X (each GPU uploads its rows); float32 data.  The kNN
row times kneighbors of the queries against the fitted index (fitted once per session,
outside the timing): on cuda:0 / cuda:all the shards stay on their GPUs between calls,
while the one-GPU session uploads the index at every call (compare cuda:0 with
cuda:all for the search's own scaling).  Its weak scaling grows the index, not the
queries (each GPU searches as many rows as the baseline); the forest's grows the trees
(each GPU grows as many trees as the baseline), and it has no collectives.
The collectives column: the strong-scaling fit's all-reduces / all-gathers (calls,
bytes per rank, wall time, host copies included: the session info's counters).  Then
bench_comm (built beside libgsb, or $GSB_BENCH_COMM) measures NCCL's own all-reduce
bandwidth over every GPU (buffers in GPU memory: NVLink where there is one), and each
case's collective bytes are set against it.
"""
import argparse
import json
import os
import re
import subprocess
import time

import numpy as np

import gsb
from gsb._registry import ALL


def ranks(device):
    """The rank count of a multi-device session, 0 when it cannot open (reason printed)."""
    before = gsb.get_config()["device"]
    try:
        gsb.set_config(device=device)
        from gsb._session import get_session
        return int(get_session().info()["devices"]["ranks"])
    except Exception as e:  # noqa: BLE001 - reported, the multi-device columns stay empty
        print(f"# {device} unavailable: {e}\n")
        return 0
    finally:
        gsb.set_config(device=before)


KNN_QUERIES, KNN_K = 10_000, 10


def case_data(name, n, rng):
    """X and y; for kNN, y is the queries."""
    if name.startswith("kNN"):
        return (rng.standard_normal((n, 64), dtype=np.float32),
                rng.standard_normal((KNN_QUERIES, 64), dtype=np.float32))
    if name.startswith("RandomForest"):
        X = rng.standard_normal((n, 32), dtype=np.float32)
        return X, (X[:, 0] + X[:, 1] * X[:, 2] > 0.5).astype(np.int64) + (X[:, 3] > 1)
    if name.startswith("KMeans"):
        X = rng.standard_normal((n, 64), dtype=np.float32)
        X += rng.integers(0, 8, size=(n, 1)).astype(np.float32)  # some structure
        return X, None
    X = rng.standard_normal((n, 256), dtype=np.float32)
    y = X[:, :8].sum(axis=1) + 0.1 * rng.standard_normal(n, dtype=np.float32)
    return X, y


FOREST_TREES = 32


def make(name, X, grow=1):
    """The case's estimator; grow multiplies a forest's trees (its weak scaling)."""
    if name.startswith("RandomForest"):
        return ALL["RandomForestClassifier"](n_estimators=FOREST_TREES * grow, max_depth=10,
                                             random_state=0)
    if name.startswith("kNN"):
        return ALL["NearestNeighbors"](n_neighbors=KNN_K)
    if name.startswith("KMeans"):
        return ALL["KMeans"](n_clusters=100, init=X[:100].copy(), n_init=1, tol=0.0,
                             max_iter=20)
    if name.startswith("PCA"):
        return ALL["PCA"](n_components=16)
    return ALL["LinearRegression"]()


def collectives():
    """The session's collective counters (calls, bytes, seconds), zeros without a set."""
    from gsb._session import get_session
    c = get_session().info().get("devices", {}).get("collectives", {})
    return (c.get("calls", 0), c.get("bytes", 0), c.get("seconds", 0.0))


def timed(device, name, X, y, repeats, grow=1):
    """The best wall time of repeats fits (kNN: of repeats kneighbors of the queries y
    against X, fitted once), and that call's collectives (calls, bytes, s)."""
    gsb.set_config(device=device)
    best, coll = float("nan"), (0, 0, 0.0)
    knn = make(name, X).fit(X) if name.startswith("kNN") else None
    for _ in range(repeats):
        est = knn or make(name, X, grow)
        before = collectives()
        t0 = time.perf_counter()
        if knn is not None:
            knn.kneighbors(y)
        else:
            est.fit(X, y) if y is not None else est.fit(X)
        t = time.perf_counter() - t0
        after = collectives()
        if not best <= t:
            best, coll = t, tuple(a - b for a, b in zip(after, before))
    return best, coll


def comm_bandwidth():
    """bench_comm's measurements (a list of dicts), [] when it cannot run."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    lib = os.environ.get("GSB_LIBRARY")
    tried = [os.environ.get("GSB_BENCH_COMM"),
             lib and os.path.join(os.path.dirname(lib), "bench_comm"),
             os.path.join(root, "build-gpu", "bench_comm"), os.path.join(root, "build", "bench_comm")]
    tried = [t for t in tried if t]
    exe = next((t for t in tried if os.path.exists(t)), None)
    if not exe:
        print(f"# no bench_comm (looked at {', '.join(tried)}): NCCL's bandwidth not measured")
        return []
    try:
        out = subprocess.run([exe], capture_output=True, text=True, timeout=300, check=True)
    except (subprocess.SubprocessError, OSError) as e:
        print(f"# bench_comm failed: {e}")
        return []
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json")
    ap.add_argument("--cases", help="only the cases whose names match this regex")
    ap.add_argument("--one", default="cuda", help="the baseline session's device")
    ap.add_argument("--rank1", default="cuda:0", help="the multi-device path on one device")
    ap.add_argument("--multi", default="cuda:all", help="the multi-device session")
    args = ap.parse_args()
    gpus = ranks(args.multi)
    if not ranks(args.rank1):
        args.rank1 = None
    rng = np.random.default_rng(0)
    cases = [("KMeans(100) 4M x 64", 4_000_000), ("LinearRegression 4M x 256", 4_000_000),
             ("PCA(16) 4M x 256", 4_000_000),
             (f"kNN 1M x 64 ({KNN_QUERIES // 1000}k queries, k={KNN_K})", 1_000_000),
             (f"RandomForestClassifier 1M x 32 ({FOREST_TREES} trees, depth 10)", 1_000_000)]
    if args.cases:
        cases = [c for c in cases if re.search(args.cases, c[0], re.IGNORECASE)]
    rows = []
    print(f"# multi-device fits: {args.one} against {args.multi} ({gpus} ranks), float32, "
          f"best of {args.repeats}\n")
    print(f"| case | rows | {args.one} | {args.rank1} (1 rank) | {args.multi} strong | speed-up "
          f"| {args.multi} weak (rows x ranks) | weak efficiency | collectives (strong) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, n0 in cases:
        n = max(1000, int(n0 * args.scale))
        X, y = case_data(name, n, rng)
        one, _ = timed(args.one, name, X, y, args.repeats)
        rank1, _ = (timed(args.rank1, name, X, y, args.repeats) if args.rank1
                    else (float("nan"), None))
        strong, coll = (timed(args.multi, name, X, y, args.repeats) if gpus > 1
                        else (float("nan"), (0, 0, 0.0)))
        weak = float("nan")
        if gpus > 1 and name.startswith("RandomForest"):  # trees x ranks, the same rows
            weak, _ = timed(args.multi, name, X, y, args.repeats, grow=gpus)
        elif gpus > 1:
            Xw = np.concatenate([X] * gpus)
            yw = (y if y is None or name.startswith("kNN")  # the same queries
                  else np.concatenate([y] * gpus))
            weak, _ = timed(args.multi, name, Xw, yw, args.repeats)
            del Xw, yw
        row = {"case": name, "rows": n, "ranks": gpus, "one": one, "rank1": rank1,
               "strong": strong, "weak": weak, "coll_calls": coll[0], "coll_bytes": coll[1],
               "coll_seconds": coll[2]}
        rows.append(row)
        print(f"| {name} | {n} | {one:.3f} s | {rank1:.3f} s | {strong:.3f} s | "
              f"{one / strong:.2f}x | {weak:.3f} s | {one / weak:.2f} | {coll[0]} calls, "
              f"{coll[1] / 1e6:.2f} MB, {coll[2] * 1e3:.1f} ms |", flush=True)
    if gpus > 1 and args.multi.startswith("cuda"):
        bw = comm_bandwidth()
        if bw:
            print(f"\n# NCCL all-reduce over {bw[0]['ranks']} GPUs (bench_comm, float32, "
                  f"buffers in GPU memory)\n")
            print("| bytes per rank | time | algbw | busbw |")
            print("|---:|---:|---:|---:|")
            for b in bw:
                print(f"| {b['bytes']} | {b['seconds'] * 1e6:.1f} us | {b['algbw']:.1f} GB/s "
                      f"| {b['busbw']:.1f} GB/s |")
            peak = max(b["algbw"] for b in bw)
            print(f"\nAt the measured peak ({peak:.1f} GB/s algbw) each case's collective "
                  f"bytes would move in: " + ", ".join(
                      f"{r['case']} {r['coll_bytes'] / (peak * 1e9) * 1e3:.3f} ms "
                      f"(took {r['coll_seconds'] * 1e3:.1f} ms)" for r in rows))
            for r in rows:
                r["nccl_peak_algbw"] = peak
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
