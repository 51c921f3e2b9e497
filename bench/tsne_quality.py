#!/usr/bin/env python3
"""tsne_quality.py - gsb's TSNE against scikit-learn's on the TSNE issue's quality sets.

Digits (1797 x 64) and a 20k-row make_blobs set (too big for CI; the CI test,
tests/python/test_parity_manifold.py, runs a digits subsample).  For each set
and method, both libraries fit with the same perplexity, iterations and
random_state; the judges are the issue's: gsb's trustworthiness
(sklearn.manifold.trustworthiness, n_neighbors=10) no lower than scikit-learn's
minus 0.01, and gsb's KL divergence within 10% of scikit-learn's.  gsb's 'fft'
(scikit-learn has none) is judged against scikit-learn's Barnes-Hut.

    GSB_LIBRARY=build/libgsb.so PYTHONPATH=python python3 bench/tsne_quality.py \
        [--device cpu|cuda] [--sets digits,blobs20k] [--methods barnes_hut,fft,exact]

Trustworthiness of 20k points needs ~7 GB (scikit-learn's dense ranks).  'exact'
is run on digits only (O(n^2) memory in both libraries).
"""
import argparse
import time

import numpy as np
import sklearn
from sklearn.datasets import load_digits, make_blobs
from sklearn.manifold import TSNE as SkTSNE
from sklearn.manifold import trustworthiness

import gsb


def data_sets(names):
    out = {}
    if "digits" in names:
        out["digits 1797 x 64"] = load_digits(return_X_y=True)[0].astype(np.float32)
    if "blobs20k" in names:
        X, _ = make_blobs(n_samples=20_000, n_features=50, centers=10, cluster_std=2.0,
                          random_state=0)
        out["make_blobs 20k x 50"] = X.astype(np.float32)
    return out


def run(cls, X, method, seed):
    t0 = time.perf_counter()
    m = cls(method=method, random_state=seed).fit(X)
    secs = time.perf_counter() - t0
    return m.embedding_, float(m.kl_divergence_), secs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--sets", default="digits,blobs20k")
    ap.add_argument("--methods", default="barnes_hut,fft,exact")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    gsb.set_config(device=args.device)
    from gsb.manifold import TSNE as GsbTSNE

    print(f"# TSNE quality, gsb device={args.device}, scikit-learn {sklearn.__version__}, "
          f"random_state={args.seed}")
    print("| data | method | sklearn trust | gsb trust | sklearn KL | gsb KL | sklearn s "
          "| gsb s | verdict |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    failed = False
    for name, X in data_sets(args.sets.split(",")).items():
        sk_cache = {}
        for method in args.methods.split(","):
            if method == "exact" and len(X) > 5000:
                continue
            ref = "barnes_hut" if method == "fft" else method
            if ref not in sk_cache:
                E, kl, secs = run(SkTSNE, X, ref, args.seed)
                sk_cache[ref] = (trustworthiness(X, E, n_neighbors=10), kl, secs)
            sk_trust, sk_kl, sk_secs = sk_cache[ref]
            E, kl, secs = run(GsbTSNE, X, method, args.seed)
            trust = trustworthiness(X, E, n_neighbors=10)
            ok = trust >= sk_trust - 0.01 and abs(kl - sk_kl) <= 0.1 * sk_kl
            failed |= not ok
            print(f"| {name} | {method} (vs {ref}) | {sk_trust:.4f} | {trust:.4f} | "
                  f"{sk_kl:.4f} | {kl:.4f} | {sk_secs:.1f} | {secs:.1f} | "
                  f"{'met' if ok else 'MISSED'} |", flush=True)
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
