#!/usr/bin/env python3
"""umap_quality.py - gsb's UMAP against umap-learn on the UMAP issue's 50k-row
make_blobs set: trustworthiness (n_neighbors=10) of the fit on 90% of the rows
and of transform() on the other 10%, and the times.

    python3 bench/umap_quality.py [--n 50000] [--device cpu|cuda|auto]

The issue's bounds: fit >= umap-learn's - 0.02, transform >= umap-learn's - 0.03.
scikit-learn's trustworthiness holds an n x n distance matrix (20 GB at 50k
rows); this computes the same quantity a block of rows at a time.  The CI-sized
version of the check (digits, 5000 rows) is tests/python/test_parity_umap.py.
"""
import argparse
import sys
import time
import warnings

import numpy as np
from sklearn.datasets import make_blobs
from sklearn.model_selection import train_test_split
from sklearn.neighbors import NearestNeighbors


def trustworthiness(X, E, k=10, block=256):
    """scikit-learn's trustworthiness(X, E, n_neighbors=k), without the n x n matrix:
    1 - 2 / (n k (2n - 3k - 1)) * sum over i and over E's k nearest neighbours j of i
    that are not among X's k nearest of max(0, rank_X(i, j) - k), rank 1 the nearest
    (equal to scikit-learn's where no two distances tie; ties rank by argsort there)."""
    X = np.asarray(X, dtype=np.float64)
    n = len(X)
    e_nn = NearestNeighbors(n_neighbors=k).fit(E).kneighbors(return_distance=False)
    sq = (X * X).sum(1)
    total = 0.0
    for s in range(0, n, block):
        rows = slice(s, min(s + block, n))
        d = sq[rows, None] - 2.0 * X[rows] @ X.T + sq[None, :]
        d[np.arange(d.shape[0]), np.arange(s, rows.stop)] = np.inf  # a point is not its own
        dj = np.take_along_axis(d, e_nn[rows], axis=1)
        # rank of each embedding neighbour among the row's original distances
        ranks = (d[:, None, :] < dj[:, :, None]).sum(axis=2) + 1
        total += np.maximum(ranks - k, 0).sum()
    return 1.0 - total * (2.0 / (n * k * (2.0 * n - 3.0 * k - 1.0)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--d", type=int, default=32)
    ap.add_argument("--centers", type=int, default=20)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    X, _ = make_blobs(args.n, args.d, centers=args.centers, cluster_std=2.0, random_state=0)
    X = X.astype(np.float32)
    Xtr, Xte = train_test_split(X, test_size=0.1, random_state=0)

    import gsb
    from gsb.manifold import UMAP
    import umap
    gsb.set_config(device=args.device)
    print(f"# {args.n} x {args.d} make_blobs ({args.centers} centres), fit on {len(Xtr)} rows, "
          f"transform {len(Xte)}; gsb device={args.device}")
    print("| library | fit s | transform s | trustworthiness fit | trustworthiness transform |")
    print("|---|---:|---:|---:|---:|")
    results = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        umap.UMAP(n_epochs=5).fit(Xtr[:5000]).transform(Xte[:100])  # numba's compile
        for name, make in (("gsb", UMAP), ("umap-learn", umap.UMAP)):
            t0 = time.perf_counter()
            model = make(random_state=0).fit(Xtr)
            t1 = time.perf_counter()
            new = model.transform(Xte)
            t2 = time.perf_counter()
            tf = trustworthiness(Xtr, model.embedding_)
            tt = trustworthiness(Xte, new)
            results[name] = (tf, tt)
            print(f"| {name} | {t1 - t0:.1f} | {t2 - t1:.1f} | {tf:.4f} | {tt:.4f} |",
                  flush=True)
    (gf, gt), (rf, rt) = results["gsb"], results["umap-learn"]
    ok = gf >= rf - 0.02 and gt >= rt - 0.03
    print(f"\nfit {gf:.4f} >= {rf - 0.02:.4f} and transform {gt:.4f} >= {rt - 0.03:.4f}: "
          f"{'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
