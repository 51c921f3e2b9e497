"""Engine methods that need more than the generated classes give every method.

- partial_fit (StandardScaler, MinMaxScaler): an engine fit method that updates
  the fitted model instead of replacing it; the first call creates it.
- Methods that exist only with a parameter set, as scikit-learn's available_if:
  SVC.predict_proba and predict_log_proba need probability=True (without it,
  hasattr() is False and the call raises AttributeError in scikit-learn's words).
- kernel='precomputed' makes X pairwise (scikit-learn's input tag), so model
  selection splits the Gram matrix's rows and columns alike.
"""
from sklearn.utils.metaestimators import available_if

from ._convert import as_array
from ._estimator import _fit_feature_names

_NEEDS_PARAM = {("SVC", "predict_proba"): "probability",
                ("SVC", "predict_log_proba"): "probability"}


def _partial_fit_method(takes_weights):
    def partial_fit(self, X, y=None, sample_weight=None):
        """Update the fitted statistics with the batch X (the first call fits)."""
        first = not hasattr(self, "n_features_in_")
        if first:  # the first batch sets the feature names, later ones are checked
            names, X = _fit_feature_names(X), as_array(X, "X", self)
        else:
            names, X = getattr(self, "feature_names_in_", None), self._input(X)
        inputs = [X, None if y is None else as_array(y, "y", self)]
        if sample_weight is not None:
            inputs.append(as_array(sample_weight, "sample_weight", self))
        self._model(create=True)  # the engine model, kept across calls
        self._call("partial_fit", inputs)
        self._finish_fit(names)
        return self

    if takes_weights:
        return partial_fit

    def partial_fit_no_weights(self, X, y=None):
        return partial_fit(self, X, y)
    partial_fit_no_weights.__name__ = partial_fit_no_weights.__qualname__ = "partial_fit"
    partial_fit_no_weights.__doc__ = partial_fit.__doc__
    return partial_fit_no_weights


def _needs(method, param):
    def check(self):
        value = getattr(self, param)
        if isinstance(value, str) or not value:  # False, or scikit-learn's 'deprecated'
            raise AttributeError(f"{method} is not available when {param}=False")
        return True
    return check


def _only_with(cls, method, param):
    impl = getattr(cls, method)

    def call(self, X):
        return impl(self, X)
    call.__name__ = method
    call.__qualname__ = f"{cls.__name__}.{method}"
    call.__module__ = cls.__module__
    call.__doc__ = f"{method} (only with {param}=True, as in scikit-learn)."
    setattr(cls, method, available_if(_needs("predict_proba", param))(call))


def _pairwise_when_precomputed(cls):
    base = cls.__sklearn_tags__

    def __sklearn_tags__(self):
        tags = base(self)
        tags.input_tags.pairwise = self.kernel == "precomputed"
        return tags
    cls.__sklearn_tags__ = __sklearn_tags__


def patch(cls):
    """Add partial_fit, the conditional methods and the tags the descriptor calls for."""
    desc = cls._gsb_desc
    kernel = next((p for p in desc["params"] if p["name"] == "kernel"), None)
    if kernel is not None and "precomputed" in (kernel.get("choices") or []):
        _pairwise_when_precomputed(cls)
    for m in desc["methods"]:
        if m["name"] == "partial_fit":
            weights = any(i["name"] == "sample_weight" for i in m["inputs"])
            cls.partial_fit = _partial_fit_method(weights)
        param = _NEEDS_PARAM.get((desc["name"], m["name"]))
        if param is not None and hasattr(cls, m["name"]):
            _only_with(cls, m["name"], param)
    return cls
