#!/usr/bin/env python3
"""Do remote and embedded fits agree bit for bit on this device? (The GPU suite of
2026-11-26's third session had 16 remote-equals-embedded failures.)
Runs LinearRegression / KMeans / Lasso / UMAP embedded twice, then through an
in-process server on each device named (default: cuda, cpu), and prints which
results are bit-identical.  Usage: GSB_DEVICE=cuda tools/remote-check.py [cuda] [cpu]"""
import sys
import tempfile
import threading
import numpy as np
import gsb, gsb.server
from gsb.linear_model import LinearRegression, Lasso
from gsb.cluster import KMeans
from gsb.manifold import UMAP

def data(dtype, n=240, d=6, seed=0):
    rng = np.random.default_rng(seed)
    c = rng.uniform(-4, 4, size=(3, d)); cls = rng.integers(0, 3, size=n)
    X = (c[cls] + rng.normal(size=(n, d))).astype(dtype)
    return X, (X @ rng.normal(size=d) + 0.1 * rng.normal(size=n)).astype(dtype)

def work(X, y):
    return {"LR.coef_": LinearRegression().fit(X, y).coef_,
            "KM.centers": KMeans(n_clusters=3, random_state=0, n_init=2).fit(X).cluster_centers_,
            "Lasso.coef_": Lasso(alpha=0.01).fit(X, y).coef_,
            "UMAP": UMAP(n_epochs=50, random_state=0).fit(np.tile(X, (2, 1))).embedding_}

def cmp(tag, a, b):
    for k in a:
        eq = np.array_equal(a[k], b[k])
        print(f"{tag:42s} {k:12s} {'same' if eq else 'DIFF %.3g' % np.max(np.abs(a[k] - b[k]) / (np.abs(b[k]) + 1e-30))}")

tmp = tempfile.mkdtemp()
for dt in (np.float64, np.float32):
    X, y = data(dt)
    e1 = work(X, y); e2 = work(X, y)
    cmp(f"{dt.__name__}: embedded vs embedded", e1, e2)
    t = {}
    th = threading.Thread(target=lambda: t.update(work(X, y))); th.start(); th.join()
    cmp(f"{dt.__name__}: embedded vs embedded in a thread", t, e1)
    for dev in (sys.argv[1:] or ["cuda", "cpu"]):
        srv = gsb.server.start(listen=[f"unix://{tmp}/{dev}{dt.__name__}.sock"], data_dir=f"{tmp}/{dev}{dt.__name__}",
                               device=dev, log_level="warn")
        gsb.connect(srv.url_of("unix"))
        try:
            r = work(X, y)
        finally:
            gsb.connect(None)
        cmp(f"{dt.__name__}: server device={dev} vs embedded", r, e1)
        srv.stop()
