#!/usr/bin/env python3
"""dask_scaling.py - weak scaling of gsb.dask: 1, 2, 4 workers, the data growing with
the workers (rows = --rows-per-worker x workers), on a LocalCluster of worker processes.

    python3 bench/dask_scaling.py                                   # CPU workers
    python3 bench/dask_scaling.py --device cuda                     # GPU workers
    python3 bench/dask_scaling.py --rows-per-worker 20000 --workers 1,2   # a quick run

Each worker is one process with one Dask thread and --omp-threads OpenMP threads for
the engine (default: cores / the largest worker count, so every row of the table uses
the same cores per worker); --device cuda sets GSB_DEVICE=cuda in the workers (on a
one-GPU machine they share it: the table then shows how the GPU is shared, not
multi-GPU scaling).  Data are generated on the workers (dask.array.random) and
persisted before timing; each time is the median of --repeats fits.  Weak-scaling
efficiency = time(1 worker) / time(w workers): 1.0 is perfect.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np


def cases(k_clusters, n_query):
    import gsb.dask as gd

    def kmeans(X, y, yc, init, Q):
        return gd.KMeans(n_clusters=k_clusters, init=init, n_init=1, max_iter=10, tol=0).fit(X)

    return {
        "StandardScaler": lambda X, y, yc, init, Q: gd.StandardScaler().fit(X),
        "LinearRegression": lambda X, y, yc, init, Q: gd.LinearRegression().fit(X, y),
        "Ridge": lambda X, y, yc, init, Q: gd.Ridge(alpha=1.0).fit(X, y),
        "PCA": lambda X, y, yc, init, Q: gd.PCA(n_components=8).fit(X),
        "LogisticRegression": lambda X, y, yc, init, Q: gd.LogisticRegression(
            max_iter=20).fit(X, yc),
        "KMeans (10 iterations)": kmeans,
        f"NearestNeighbors ({n_query} queries)": lambda X, y, yc, init, Q: (
            gd.NearestNeighbors(n_neighbors=10).fit(X).kneighbors(Q)[1].compute()),
    }


def run(workers, args):
    import dask.array as da
    from dask.distributed import Client, LocalCluster
    env = {"OMP_NUM_THREADS": str(args.omp_threads), "GSB_DEVICE": args.device,
           "OPENBLAS_NUM_THREADS": str(args.omp_threads)}
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           dashboard_address=None, silence_logs=40, env=env)
    client = Client(cluster)
    try:
        n, d = args.rows_per_worker * workers, args.features
        chunk = args.rows_per_worker // args.parts_per_worker
        rng = da.random.default_rng(0)
        X = rng.normal(size=(n, d), chunks=(chunk, d))
        coef = np.linspace(-1, 1, d)
        y = X @ coef + rng.normal(size=n, chunks=chunk)
        yc = (y > 0).astype(np.int64)
        X, y, yc = client.persist([X, y, yc])
        init = X[:args.clusters].compute()
        Q = X[:args.queries]
        out = {}
        for name, fn in cases(args.clusters, args.queries).items():
            if args.only and not any(s.lower() in name.lower() for s in args.only):
                continue
            fn(X, y, yc, init, Q)  # warm: imports, engine models, scheduler paths
            times = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                fn(X, y, yc, init, Q)
                times.append(time.perf_counter() - t)
            out[name] = statistics.median(times)
        return out
    finally:
        client.close()
        cluster.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", default="1,2,4")
    p.add_argument("--rows-per-worker", type=int, default=500_000)
    p.add_argument("--features", type=int, default=32)
    p.add_argument("--parts-per-worker", type=int, default=4)
    p.add_argument("--clusters", type=int, default=16)
    p.add_argument("--queries", type=int, default=2000)
    p.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu")
    p.add_argument("--omp-threads", type=int, default=0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--only", nargs="*", help="run only the cases whose names contain these")
    args = p.parse_args()
    workers = [int(w) for w in args.workers.split(",")]
    # the cores this process may use (taskset / cgroup affinity), not the machine's
    if hasattr(os, "sched_getaffinity"):
        cores = len(os.sched_getaffinity(0))
    else:
        cores = os.cpu_count() or 1
    if args.omp_threads <= 0:
        args.omp_threads = max(1, cores // max(workers))
    results = {w: run(w, args) for w in workers}
    names = list(results[workers[0]])
    print(f"\ngsb.dask weak scaling: {args.rows_per_worker} rows x {args.features} features "
          f"per worker, {args.parts_per_worker} partitions per worker, device={args.device}, "
          f"{args.omp_threads} OpenMP threads per worker, {cores} cores; "
          f"median of {args.repeats} (seconds; efficiency = t(1 worker) / t(w))\n")
    head = "| case | " + " | ".join(f"{w} worker{'s' if w > 1 else ''}" for w in workers) + " |"
    print(head)
    print("|---" * (len(workers) + 1) + "|")
    base = workers[0]
    for name in names:
        cells = []
        for w in workers:
            t = results[w][name]
            eff = results[base][name] / t if base == 1 else float("nan")
            cells.append(f"{t:.3f} s ({eff:.2f})" if base == 1 else f"{t:.3f} s")
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
