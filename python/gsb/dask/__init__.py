"""gsb.dask: gsb estimators fitted across the workers of a dask.distributed cluster.

    from dask.distributed import Client
    import gsb.dask
    client = Client("tcp://scheduler:8786")        # or a LocalCluster
    km = gsb.dask.cluster.KMeans(n_clusters=8).fit(X)   # X: dask array or dataframe
    labels = km.predict(X)                         # lazy dask array
    km.to_local().save("km")                       # an ordinary gsb estimator

Each worker runs the gsb engine in its own process on its partitions (its GPU when
it has one, else its CPUs); the engine computes per-partition sufficient statistics,
merged exactly on the workers, and the driver fits from the merged statistics
(docs/DASK.md).  A fitted estimator predicts and transforms lazily, partition by
partition.  Needs dask and distributed.
"""
from . import cluster, decomposition, ensemble, linear_model, neighbors, preprocessing
from .cluster import KMeans
from .ensemble import RandomForestClassifier, RandomForestRegressor
from .decomposition import PCA, TruncatedSVD
from .linear_model import ElasticNet, Lasso, LinearRegression, LogisticRegression, Ridge
from .neighbors import KNeighborsClassifier, KNeighborsRegressor, NearestNeighbors
from .preprocessing import StandardScaler

__all__ = ["cluster", "decomposition", "ensemble", "linear_model", "neighbors", "preprocessing",
           "KMeans", "PCA", "TruncatedSVD", "ElasticNet", "Lasso", "LinearRegression",
           "LogisticRegression", "Ridge",
           "KNeighborsClassifier", "KNeighborsRegressor", "NearestNeighbors", "StandardScaler",
           "RandomForestClassifier", "RandomForestRegressor"]
