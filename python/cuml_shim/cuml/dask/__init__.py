"""cuml.dask on gsb: `cuml.dask.cluster.KMeans`, `cuml.dask.linear_model.Ridge`, ... are
gsb.dask's estimators (fitted across the workers of a dask.distributed Client, the gsb
engine in each worker).  Their constructors take client= as cuML's do, fitted models
convert with get_combined_model() (an ordinary cuml/gsb estimator), and predict /
transform return lazy dask arrays."""
import sys as _sys

import gsb.dask as _gd
from gsb.dask import cluster, decomposition, ensemble, linear_model, neighbors, preprocessing  # noqa: F401,E501

for _name in ("cluster", "decomposition", "ensemble", "linear_model", "neighbors", "preprocessing"):
    _sys.modules[f"{__name__}.{_name}"] = getattr(_gd, _name)

__all__ = ["cluster", "decomposition", "ensemble", "linear_model", "neighbors", "preprocessing"]
