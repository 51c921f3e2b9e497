"""cuml.manifold: gsb's manifold estimators with cuML's output_type (see cuml._classes),
TSNE with cuML's signature and defaults.

cuml.TSNE takes cuML's parameters.  Those gsb implements keep cuML's defaults
(method='fft', init='random', learning_rate=200.0, learning_rate_method='adaptive',
which sets learning_rate = max(n_samples / 3, 1) and early_exaggeration = 24 above
10000 samples, 12 below, as cuML does).  cuML's other knobs are accepted at the
values gsb's algorithm has built in and refused otherwise, with a ValueError that
says what gsb does instead; handle (cuML's GPU plumbing) is accepted and ignored.
"""
from ._classes import export as _export

__all__ = _export("manifold", globals())
_CumlTSNE = globals()["TSNE"]  # gsb's TSNE with cuML's output_type

# cuML-only parameters: the values gsb's algorithm has built in, and what to say otherwise
_FIXED = {
    "late_exaggeration": (1.0, "the embedding is not exaggerated after the early phase"),
    "n_neighbors": (90, "the kNN graph has int(3 * perplexity + 1) neighbours, as "
                        "scikit-learn's; set perplexity instead"),
    "perplexity_max_iter": (100, "each row's perplexity search runs scikit-learn's 100 "
                                 "bisection steps"),
    "exaggeration_iter": (250, "early exaggeration lasts 250 iterations, as scikit-learn's"),
    "pre_momentum": (0.5, "momentum is 0.5 during early exaggeration, as scikit-learn's"),
    "post_momentum": (0.8, "momentum is 0.8 after early exaggeration, as scikit-learn's"),
    "square_distances": (True, "input distances are always squared, as scikit-learn does"),
    "precomputed_knn": (None, "pass metric='precomputed' with a distance matrix instead"),
}
_IGNORED = ("handle", "output_type")
_CUML_ONLY = tuple(_FIXED) + _IGNORED + ("learning_rate_method",)


class TSNE(_CumlTSNE):
    __doc__ = _CumlTSNE.__doc__

    def __init__(self, n_components=2, *, perplexity=30.0, early_exaggeration=12.0,
                 late_exaggeration=1.0, learning_rate=200.0, max_iter=1000,
                 n_iter_without_progress=300, min_grad_norm=1e-07, metric="euclidean",
                 metric_params=None, init="random", verbose=False, random_state=None,
                 method="fft", angle=0.5, n_neighbors=90, perplexity_max_iter=100,
                 exaggeration_iter=250, pre_momentum=0.5, post_momentum=0.8,
                 learning_rate_method="adaptive", square_distances=True,
                 precomputed_knn=None, handle=None, output_type=None, n_jobs=None):
        self.n_components = n_components
        self.perplexity = perplexity
        self.early_exaggeration = early_exaggeration
        self.late_exaggeration = late_exaggeration
        self.learning_rate = learning_rate
        self.max_iter = max_iter
        self.n_iter_without_progress = n_iter_without_progress
        self.min_grad_norm = min_grad_norm
        self.metric = metric
        self.metric_params = metric_params
        self.init = init
        self.verbose = verbose
        self.random_state = random_state
        self.method = method
        self.angle = angle
        self.n_neighbors = n_neighbors
        self.perplexity_max_iter = perplexity_max_iter
        self.exaggeration_iter = exaggeration_iter
        self.pre_momentum = pre_momentum
        self.post_momentum = post_momentum
        self.learning_rate_method = learning_rate_method
        self.square_distances = square_distances
        self.precomputed_knn = precomputed_knn
        self.handle = handle
        self.output_type = output_type
        self.n_jobs = n_jobs

    def _check_cuml_params(self):
        for name, (value, instead) in _FIXED.items():
            got = getattr(self, name)
            if got is None and name == "n_neighbors":
                continue
            if got is not value and got != value:
                raise ValueError(f"cuml.TSNE({name}={got!r}) is not supported by gsb: "
                                 f"{instead} (accepted: {name}={value!r}).")
        if self.learning_rate_method not in ("adaptive", "none", None):
            raise ValueError(f"cuml.TSNE(learning_rate_method={self.learning_rate_method!r}): "
                             f"expected 'adaptive', 'none' or None.")

    def _engine_params(self, params):
        self._check_cuml_params()
        params = {k: v for k, v in params.items() if k not in _CUML_ONLY}
        n = self.__dict__.get("_cuml_n_samples")
        if self.learning_rate_method == "adaptive" and n is not None:
            params["learning_rate"] = max(n / 3.0, 1.0)
            params["early_exaggeration"] = 24.0 if n > 10000 else 12.0
        return super()._engine_params(params)

    def _remember_rows(self, X):
        shape = getattr(X, "shape", None)
        self.__dict__["_cuml_n_samples"] = int(shape[0]) if shape else len(X)

    def fit(self, X, y=None):
        self._remember_rows(X)
        return super().fit(X, y)

    def fit_transform(self, X, y=None, **fit_params):
        self._remember_rows(X)
        return super().fit_transform(X, y, **fit_params)
