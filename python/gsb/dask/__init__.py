from . import decomposition, linear_model, preprocessing
