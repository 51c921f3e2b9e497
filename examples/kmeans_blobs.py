"""KMeans on four blobs, and the picture it makes (docs/images/kmeans-blobs.png).

    python3 examples/kmeans_blobs.py [OUTPUT.png]

Fits gsb's KMeans to scikit-learn's make_blobs, prints how well the clusters
match the blobs the points came from, and draws the points coloured by their
cluster with the cluster centres on top.  Needs matplotlib.
"""
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only: no display needed
import matplotlib.pyplot as plt  # noqa: E402
from sklearn.datasets import make_blobs  # noqa: E402
from sklearn.metrics import adjusted_rand_score  # noqa: E402

from gsb.cluster import KMeans  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
out = sys.argv[1] if len(sys.argv) > 1 else \
    os.path.normpath(os.path.join(HERE, "..", "docs", "images", "kmeans-blobs.png"))

X, blob = make_blobs(n_samples=2000, centers=4, cluster_std=1.2, random_state=7)
km = KMeans(n_clusters=4, random_state=0).fit(X)
print(f"KMeans(n_clusters=4): inertia {km.inertia_:.1f} after {km.n_iter_} iterations; "
      f"adjusted Rand index against the blobs {adjusted_rand_score(blob, km.labels_):.3f}")

fig, ax = plt.subplots(figsize=(6.4, 4.8))
ax.scatter(X[:, 0], X[:, 1], c=km.labels_, cmap="tab10", vmin=0, vmax=9, s=7, alpha=0.8)
ax.scatter(km.cluster_centers_[:, 0], km.cluster_centers_[:, 1], marker="X", s=180,
           c="white", edgecolors="black", linewidths=1.5, label="cluster_centers_")
ax.set_title(f"gsb KMeans(n_clusters=4) on make_blobs: {len(X)} points, "
             f"{km.n_iter_} iterations", fontsize=10)
ax.set_xlabel("feature 0")
ax.set_ylabel("feature 1")
ax.legend(loc="best", fontsize=8)
fig.tight_layout()
fig.savefig(out, dpi=100)
print(out)
