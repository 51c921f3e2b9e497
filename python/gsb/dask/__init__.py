from . import cluster, decomposition, linear_model, preprocessing
