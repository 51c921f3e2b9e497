"""The original gpu-sklearn-bridge quick start, unchanged, on gsb (embedded engine).

Runs the README snippets of the original project (``import cuml`` on a machine
without cuML, then save / list_saved / load through ``cuml_proxy``) and prints
results and timings next to scikit-learn's on the same data.
"""
import time

import numpy as np

# ---- the original README's quick start, verbatim ---------------------------------------
import cuml
from cuml.svm import SVC
from cuml.preprocessing import StandardScaler
from cuml.decomposition import PCA
from cuml.linear_model import LogisticRegression
from cuml.cluster import KMeans
X = np.random.rand(1000, 20).astype("float32"); y = (X[:, 0] > 0.5).astype("float32")
X_s = StandardScaler().fit_transform(X)
svm = SVC(kernel="rbf", C=1.0); svm.fit(X_s, y); svm.predict(X_s[:5])
print(cuml.__version__)
# ------------------------------------------------------------------------------------------

from cuml_proxy.proxy import ProxyEstimator  # noqa: E402
import gsb  # noqa: E402
import sklearn  # noqa: E402
from sklearn import cluster, decomposition, linear_model, preprocessing, svm as sk_svm  # noqa: E402


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - t0) * 1e3


def main():
    rng = np.random.default_rng(0)
    X = rng.random((5000, 20), dtype=np.float32)
    y = (X[:, 0] > 0.5).astype(np.float32)
    print(f"\ngsb {gsb.__version__} (embedded) vs scikit-learn {sklearn.__version__}, "
          f"5000 x 20 float32\n")
    print(f"{'work':42s} {'gsb ms':>9s} {'sklearn ms':>11s}  result (gsb / sklearn)")
    cases = [
        ("StandardScaler fit_transform", StandardScaler, preprocessing.StandardScaler, {},
         lambda m: m.fit_transform(X), lambda r: f"mean {abs(r.mean()):.1e}"),
        ("PCA(5) fit_transform", PCA, decomposition.PCA, {"n_components": 5},
         lambda m: m.fit_transform(X), lambda r: f"var {r.var(axis=0)[0]:.4f}"),
        ("LogisticRegression fit + score", LogisticRegression,
         linear_model.LogisticRegression, {}, lambda m: m.fit(X, y).score(X, y),
         lambda r: f"acc {r:.4f}"),
        ("KMeans(3) fit_predict", KMeans, cluster.KMeans, {"n_clusters": 3, "random_state": 0},
         lambda m: m.fit(X).inertia_, lambda r: f"inertia {r:.1f}"),
        ("SVC(rbf) fit + score (first 1000 rows)", SVC, sk_svm.SVC, {"kernel": "rbf"},
         lambda m: m.fit(X[:1000], y[:1000]).score(X[:1000], y[:1000]),
         lambda r: f"acc {r:.4f}"),
    ]
    for name, ours, theirs, params, run, show in cases:
        r1, t1 = timed(lambda: run(ours(**params)))
        r2, t2 = timed(lambda: run(theirs(**params)))
        print(f"{name:42s} {t1:9.2f} {t2:11.2f}  {show(r1)} / {show(r2)}")

    # ---- the original README's save / load / list_saved, verbatim -----------------------
    sc = StandardScaler().fit(X)
    svm = SVC(kernel="rbf", C=1.0).fit(sc.transform(X[:1000]), y[:1000])
    sc.save("my_scaler"); svm.save("my_svm")        # stored server-side
    print("\nsaved:", ProxyEstimator.list_saved())   # ['my_scaler', 'my_svm', ...]
    sc2 = ProxyEstimator.load("my_scaler")           # predictions identical to before
    same = np.array_equal(sc2.transform(X), sc.transform(X))
    svm2 = ProxyEstimator.load("my_svm")
    same &= np.array_equal(svm2.predict(sc.transform(X)), svm.predict(sc.transform(X)))
    print("loaded my_scaler and my_svm: outputs", "identical" if same else "DIFFER")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
