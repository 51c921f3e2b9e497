#!/usr/bin/env python3
"""multigpu.py - fits split across the GPUs of one machine (issue 18, docs/MULTIGPU.md).

    python3 bench/multigpu.py [--scale S] [--repeats R] [--json FILE]
    python3 bench/multigpu.py --one cpu --rank1 cpu:1 --multi cpu:2 --scale 0.01
                                        (no GPU: the same path on CPU ranks, times only)

Needs gsb as the tests find it (GSB_LIBRARY, PYTHONPATH), the CUDA plugin, and NCCL for
the multi-device sessions ($GSB_NCCL_LIBRARY where it is not on the loader's path).
For each case, the fit's wall time on:
  cuda      the one-GPU session (the baseline);
  cuda:0    the multi-device path on one GPU (NCCL with one rank: the path's overhead);
  cuda:all  every visible GPU, the same data (strong scaling) and, for weak scaling,
            the data grown with the GPU count (rows per GPU as the baseline's).
Cases (the issue's sizes; --scale multiplies the rows, 0.25 for a quick run):
  KMeans(100) 4M x 64 (explicit init, 20 Lloyd iterations: tol=0, max_iter=20),
  LinearRegression 4M x 256, PCA(16) 4M x 256.  kNN is not split yet (docs/MULTIGPU.md).
Times include the upload of X (each GPU uploads its rows); float32 data.
"""
import argparse
import json
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


def case_data(name, n, rng):
    if name.startswith("KMeans"):
        X = rng.standard_normal((n, 64), dtype=np.float32)
        X += rng.integers(0, 8, size=(n, 1)).astype(np.float32)  # some structure
        return X, None
    X = rng.standard_normal((n, 256), dtype=np.float32)
    y = X[:, :8].sum(axis=1) + 0.1 * rng.standard_normal(n, dtype=np.float32)
    return X, y


def make(name, X):
    if name.startswith("KMeans"):
        return ALL["KMeans"](n_clusters=100, init=X[:100].copy(), n_init=1, tol=0.0,
                             max_iter=20)
    if name.startswith("PCA"):
        return ALL["PCA"](n_components=16)
    return ALL["LinearRegression"]()


def timed(device, name, X, y, repeats):
    gsb.set_config(device=device)
    best = float("nan")
    for _ in range(repeats):
        est = make(name, X)
        t0 = time.perf_counter()
        est.fit(X, y) if y is not None else est.fit(X)
        t = time.perf_counter() - t0
        best = t if not best <= t else best
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json")
    ap.add_argument("--one", default="cuda", help="the baseline session's device")
    ap.add_argument("--rank1", default="cuda:0", help="the multi-device path on one device")
    ap.add_argument("--multi", default="cuda:all", help="the multi-device session")
    args = ap.parse_args()
    gpus = ranks(args.multi)
    if not ranks(args.rank1):
        args.rank1 = None
    rng = np.random.default_rng(0)
    cases = [("KMeans(100) 4M x 64", 4_000_000), ("LinearRegression 4M x 256", 4_000_000),
             ("PCA(16) 4M x 256", 4_000_000)]
    rows = []
    print(f"# multi-device fits: {args.one} against {args.multi} ({gpus} ranks), float32, "
          f"best of {args.repeats}\n")
    print(f"| case | rows | {args.one} | {args.rank1} (1 rank) | {args.multi} strong | speed-up "
          f"| {args.multi} weak (rows x ranks) | weak efficiency |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, n0 in cases:
        n = max(1000, int(n0 * args.scale))
        X, y = case_data(name, n, rng)
        one = timed(args.one, name, X, y, args.repeats)
        rank1 = timed(args.rank1, name, X, y, args.repeats) if args.rank1 else float("nan")
        strong = timed(args.multi, name, X, y, args.repeats) if gpus > 1 else float("nan")
        weak = float("nan")
        if gpus > 1:
            Xw = np.concatenate([X] * gpus)
            yw = None if y is None else np.concatenate([y] * gpus)
            weak = timed(args.multi, name, Xw, yw, args.repeats)
            del Xw, yw
        row = {"case": name, "rows": n, "ranks": gpus, "one": one, "rank1": rank1,
               "strong": strong, "weak": weak}
        rows.append(row)
        print(f"| {name} | {n} | {one:.3f} s | {rank1:.3f} s | {strong:.3f} s | "
              f"{one / strong:.2f}x | {weak:.3f} s | {one / weak:.2f} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
