"""scikit-learn-compatible estimator classes, generated from the engine's descriptors.

Every estimator the engine registers becomes a class whose __init__ lists the
engine's parameters with scikit-learn's defaults (read from gsb_info_json, so
the two cannot drift) and whose methods are the ones the engine declares.
The Python side adds what the C engine leaves to it: input conversion
(lists, pandas, any label type), label encoding for classifiers, pickling
through the engine's safe blob, progress printing and Ctrl-C.
"""
import ctypes
import json
import signal
import sys
import threading
import types
import warnings

import numpy as np
from sklearn.base import (BaseEstimator, ClassifierMixin, ClassNamePrefixFeaturesOutMixin,
                          ClusterMixin, OneToOneFeatureMixin, RegressorMixin,
                          TransformerMixin)
from sklearn.exceptions import DataConversionWarning, NotFittedError
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.validation import _check_feature_names, _get_feature_names

from . import _devarray, _lib, _output, _warnings
from ._convert import as_array, is_engine_ref
from ._data import DataHandle
from ._session import get_session


# ---- inputs -------------------------------------------------------------------

def _fit_feature_names(X):
    """The feature names fit keeps (scikit-learn's rule: the string column names of a
    DataFrame, an error for mixed types; None for arrays, lists and data handles)."""
    return None if X is None or is_engine_ref(X) else _get_feature_names(X)


# where a callable has a precomputed alternative in gsb (SVC's Gram matrix)
_PRECOMPUTED = {("SVC", "kernel")}

_TYPE_WORDS = {"int": "an int", "float": "a float", "bool": "an instance of 'bool'",
               "pair": "a tuple of two floats (min, max)", "dict": "an instance of 'dict'",
               "array": "an array-like", "none": "None"}


def _callable_param_error(est, name, value):
    """scikit-learn's InvalidParameterError for a callable where the engine needs data:
    the engine runs in C (or in gsbd) and cannot call back into Python per element."""
    desc = next((p for p in est._gsb_desc["params"] if p["name"] == name), {})
    choices = [c for c in desc.get("choices", []) if not c.startswith("~")]
    kinds = []
    for t in desc.get("types", []):
        if t == "str":
            kinds.append("a str among {" + ", ".join(repr(c) for c in choices) + "}"
                         if choices else "a str")
        elif t in _TYPE_WORDS:
            kinds.append(_TYPE_WORDS[t])
    if name == "init" and _TYPE_WORDS["array"] not in kinds:
        kinds.append(_TYPE_WORDS["array"])  # init arrays travel as a fit input
    allowed = ", ".join(kinds[:-1]) + " or " + kinds[-1] if len(kinds) > 1 else \
        (kinds[0] if kinds else "not a callable")
    hint = ""
    if (type(est).__name__, name) in _PRECOMPUTED:
        hint = f" Compute the kernel matrix in Python and pass {name}='precomputed' instead."
    return InvalidParameterError(
        f"The {name!r} parameter of {type(est).__name__} must be {allowed}. Got {value!r} "
        f"instead. Callables are not supported by gsb: its engine runs outside Python and "
        f"cannot call Python functions.{hint}")


def _json_param(value):
    if callable(value) and not isinstance(value, type):
        return {"__callable__": repr(value)}  # refused by the engine in scikit-learn's words
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, tuple):
        return [_json_param(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_param(v) for k, v in value.items()}
    return value


def _cv_folds(cv, X, y):
    """A cv that is neither None nor an int (a splitter, an iterable of (train, test)) as
    the engine's cv_folds input: n_samples x n_folds, 1 training, 2 test, 0 unused."""
    if cv is None or isinstance(cv, (int, np.integer)):
        return None
    if isinstance(X, DataHandle):
        raise TypeError("a cv splitter or iterable needs X as an array, not a gsb.DataHandle "
                        "(pass cv as an int for KFold)")
    from sklearn.model_selection import check_cv
    splits = list(check_cv(cv).split(X, y))
    folds = np.zeros((len(X), len(splits)), dtype=np.float64)
    for f, (train, test) in enumerate(splits):
        folds[train, f] = 1
        folds[test, f] = 2
    return folds


def _progress_bar(name, total):
    """A tqdm bar where one can be drawn (a terminal or a notebook), else None."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    in_notebook = "ipykernel" in sys.modules
    if not in_notebook and not (hasattr(sys.stderr, "isatty") and sys.stderr.isatty()):
        return None
    return tqdm(total=total if isinstance(total, int) and total > 0 else None, desc=name,
                unit="it", leave=False)


class _Interrupt:
    """SIGINT during a long fit asks the engine to stop at the next iteration."""

    def __init__(self):
        self.hit = False
        self.old = None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self.old = signal.signal(signal.SIGINT, self._handler)
        return self

    def _handler(self, signum, frame):
        self.hit = True

    def __exit__(self, *exc):
        if self.old is not None:
            signal.signal(signal.SIGINT, self.old)
        return False


# ---- the base class -----------------------------------------------------------

class GsbEstimator(BaseEstimator):
    """Base of every gsb estimator: the engine model and the generic call."""

    _gsb_desc = None  # the engine's descriptor of this estimator (a dict)

    # -- engine model ------------------------------------------------------------
    def _engine_params(self, params):
        out = {}
        engine_names = {p["name"] for p in self._gsb_desc["params"]}
        for name, value in params.items():
            if name not in engine_names:
                continue  # a parameter of the Python side (a subclass's, as cuML's output_type)
            if callable(value):
                raise _callable_param_error(self, name, value)
            if name == "init" and not isinstance(value, str):
                continue  # an init array travels as a fit input
            if name == "cv" and value is not None and not isinstance(value, (int, np.integer)):
                continue  # a splitter or iterable travels as the fit input cv_folds
            out[name] = _json_param(value)
        return out

    def _input(self, X, name="X"):
        """X of a method of the fitted estimator: its feature names checked against fit's
        (scikit-learn's own check, warnings and messages), then converted.  None (the
        training data, where the engine supports it) and data handles pass through."""
        if X is None or is_engine_ref(X):
            return X
        _check_feature_names(self, X, reset=False)
        return as_array(X, name, self)

    def _model(self, create=False):
        model = self.__dict__.get("_gsb_handle")
        if model is None and create:
            session = get_session()
            handle = ctypes.c_void_p()
            _lib.check(_lib.lib.gsb_model_create(
                session.handle, self._gsb_desc["name"].encode(),
                json.dumps(self._engine_params(self.get_params(deep=False))).encode(),
                ctypes.byref(handle)))
            model = _Handle(handle, session)
            self.__dict__["_gsb_handle"] = model
        elif model is not None and create:
            _lib.check(_lib.lib.gsb_model_set_params(
                model.handle,
                json.dumps(self._engine_params(self.get_params(deep=False))).encode()))
        return model

    def _call(self, method, inputs, options=None, progress=False):
        model = self._model(create=method.startswith("fit"))
        if model is None:
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet. Call 'fit' with "
                f"appropriate arguments before using this estimator.")
        # device arrays: read in place on an embedded GPU session, else copied to the host
        inputs = [_devarray.for_session(a, model.session) for a in inputs]
        for a in inputs:
            if isinstance(a, DataHandle) and a.session is not model.session:
                raise ValueError(
                    f"a gsb.DataHandle of session {a.session.url} was passed to a "
                    f"{type(self).__name__} of session {model.session.url}: put the data "
                    f"on the model's session (gsb.put after gsb.connect)")
        keep = [None if a is None else _lib.as_gsb_array(a) for a in inputs]
        while keep and keep[-1] is None:
            keep.pop()
        arr = (ctypes.POINTER(_lib.GsbArray) * max(len(keep), 1))()
        for i, g in enumerate(keep):
            arr[i] = ctypes.pointer(g) if g is not None else None
        out = ctypes.c_void_p()
        opts = json.dumps(options).encode() if options else None
        if not progress:
            status = _lib.lib.gsb_model_call(model.handle, method.encode(), arr, len(keep),
                                             opts, ctypes.byref(out))
        else:
            status = self._call_with_progress(model, method, arr, len(keep), opts, out)
        _lib.check(status)
        result = _lib.take_result(out)
        _warnings.emit()  # after freeing the result: a warning may be raised as an error
        return result

    def _call_with_progress(self, model, method, arr, n, opts, out):
        verbose = int(getattr(self, "verbose", 0) or 0)
        name = type(self).__name__
        bar = _progress_bar(name, getattr(self, "max_iter", None)) if verbose else None
        with _Interrupt() as intr:
            def report(data, stage, iteration, loss):
                if intr.hit:
                    return 1
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix_str(f"loss {loss:.6g}", refresh=False)
                if verbose > (1 if bar is not None else 0):
                    print(f"{name}: {stage.decode()} {iteration}, loss {loss:.6g}",
                          file=sys.stderr, flush=True)
                return 0
            callback = _lib.PROGRESS_FN(report)
            _lib.lib.gsb_model_set_progress(model.handle, callback, None)
            try:
                status = _lib.lib.gsb_model_call(model.handle, method.encode(), arr, n, opts,
                                                 ctypes.byref(out))
            finally:
                _lib.lib.gsb_model_set_progress(model.handle, _lib.PROGRESS_FN(), None)
                if bar is not None:
                    bar.close()
        if intr.hit and status == _lib.ECANCELLED:
            self._clear_fitted()
            raise KeyboardInterrupt(f"{name}.fit was interrupted; the estimator is unfitted "
                                    f"and can be fitted again")
        return status

    # -- fitted attributes -------------------------------------------------------
    def _clear_fitted(self):
        for key in [k for k in vars(self) if k.endswith("_") and not k.startswith("__")]:
            del self.__dict__[key]

    def _fetch_fitted(self):
        model = self._model()
        out = ctypes.c_void_p()
        _lib.check(_lib.lib.gsb_model_list_attrs(model.handle, ctypes.byref(out)))
        self._clear_fitted()
        for name in json.loads(_lib.take_string(out)):
            res = ctypes.c_void_p()
            _lib.check(_lib.lib.gsb_model_get_attr(model.handle, name.encode(),
                                                   ctypes.byref(res)))
            value = _lib.take_result(res)[name]
            if isinstance(value, np.integer):  # counts are Python ints, as in scikit-learn
                value = int(value)
            setattr(self, name, value)
        _python_attrs(self)

    # -- fit -----------------------------------------------------------------------
    def _fit_inputs(self, X, y, sample_weight, extra):
        names = [i["name"] for i in self._method("fit")["inputs"]]
        values = {"X": X, "y": y, "sample_weight": sample_weight, **extra}
        init = getattr(self, "init", None)
        if "init" in names and init is not None and not isinstance(init, str):
            if callable(init):
                raise _callable_param_error(self, "init", init)
            values["init"] = as_array(init, "init", self)
        if "cv_folds" in names:
            values["cv_folds"] = _cv_folds(getattr(self, "cv", None), X, y)
        return [values.get(n) for n in names]

    def _fit_arrays(self, X, y, sample_weight, fit_params):
        """The engine's inputs of fit (and fit_transform) from the user's arguments."""
        Xa = as_array(X, "X", self)
        if y is not None:
            y = self._encode_y_for_fit(y)
        if sample_weight is not None:
            sample_weight = as_array(sample_weight, "sample_weight", self)
        return self._fit_inputs(Xa, y, sample_weight, fit_params)

    def _fit(self, X, y=None, sample_weight=None, **fit_params):
        names = _fit_feature_names(X)
        self._call("fit", self._fit_arrays(X, y, sample_weight, fit_params), progress=True)
        self._finish_fit(names)
        return self

    def _finish_fit(self, feature_names):
        """Read the fitted state back and keep what only Python knows with the model."""
        self._fetch_fitted()
        self._after_fit()
        meta = self._label_meta()
        if feature_names is not None:
            self.feature_names_in_ = feature_names
            meta["feature_names"] = [str(n) for n in feature_names]
        try:
            text = json.dumps(meta)
        except (TypeError, ValueError):  # labels JSON cannot hold: pickle still keeps them
            text = json.dumps({k: v for k, v in meta.items() if k != "labels"})
        _lib.check(_lib.lib.gsb_model_set_meta(self._model().handle, text.encode()))

    def _restore_meta(self):
        """After gsb.load: the labels and feature names saved with the model."""
        out = ctypes.c_void_p()
        _lib.check(_lib.lib.gsb_model_get_meta(self._model().handle, ctypes.byref(out)))
        meta = json.loads(_lib.take_string(out))
        if "feature_names" in meta:
            self.feature_names_in_ = np.asarray(meta["feature_names"], dtype=object)
        self._restore_labels(meta.get("labels"))

    def _label_meta(self):
        return {}

    def _encode_y_for_fit(self, y):
        y = as_array(y, "y", self)
        if isinstance(y, DataHandle):
            return y  # the engine checks its shape
        if (self._gsb_desc["kind"] == "regressor" and y.ndim == 2 and y.shape[1] == 1
                and self._gsb_desc["name"] not in _MULTI_OUTPUT):
            warnings.warn("A column-vector y was passed when a 1d array was expected. "
                          "Please change the shape of y to (n_samples,), for example using "
                          "ravel().", DataConversionWarning, stacklevel=3)
            y = y.ravel()
        return y

    def _after_fit(self):
        pass

    def _method(self, name):
        for m in self._gsb_desc["methods"]:
            if m["name"] == name:
                return m
        return None

    # -- pickling through the engine's blob ------------------------------------------
    def __getstate__(self):
        state = {k: v for k, v in self.__dict__.items() if k != "_gsb_handle"}
        model = self.__dict__.get("_gsb_handle")
        if model is not None and _lib.lib.gsb_model_is_fitted(model.handle):
            data = ctypes.c_void_p()
            size = ctypes.c_size_t()
            _lib.check(_lib.lib.gsb_model_export(model.handle, ctypes.byref(data),
                                                 ctypes.byref(size)))
            try:
                state["_gsb_blob"] = ctypes.string_at(data.value, size.value)
            finally:
                _lib.lib.gsb_free(data)
        return state

    def __setstate__(self, state):
        blob = state.pop("_gsb_blob", None)
        self.__dict__.update(state)
        if blob is not None:
            self.__dict__["_gsb_handle"] = _Handle.from_blob(blob)

    # -- saved models (the original project's ProxyEstimator API) ----------------------
    def save(self, name):
        """Store the fitted model under name in the session's model store."""
        model = self._model()
        if model is None:
            raise NotFittedError(f"This {type(self).__name__} instance is not fitted yet.")
        _lib.check(_lib.lib.gsb_model_save(model.handle, name.encode()))
        return name


class _Handle:
    """Owns one engine model; keeps its session alive."""

    def __init__(self, handle, session):
        self.handle = handle
        self.session = session

    @classmethod
    def from_blob(cls, blob):
        session = get_session()
        handle = ctypes.c_void_p()
        _lib.check(_lib.lib.gsb_model_import(session.handle, blob, len(blob),
                                             ctypes.byref(handle)))
        return cls(handle, session)

    def __del__(self, _free=_lib.lib.gsb_model_free):
        if getattr(self, "handle", None):
            _free(self.handle)
            self.handle = None


# ---- method implementations attached per estimator --------------------------------
# Each becomes a method of the generated classes under the name of the engine method it
# calls (see _named_method): scikit-learn finds methods by that name (scorers,
# available_if, set_output), so __name__ must be the public name.

def _first(result):
    return next(iter(result.values()))


def predict(self, X):
    """Predict for the samples in X (class labels for classifiers, values for regressors,
    cluster indices for clusterers)."""
    return self._decode_y(_first(self._call("predict", [self._input(X)])))


def transform(self, X):
    """Transform X (see set_output for pandas or polars output)."""
    return _first(self._call("transform", [self._input(X)]))


def inverse_transform(self, X):
    """Transform X back to the original space."""
    # scikit-learn checks no feature names here: X is in the transformed space
    return _first(self._call("inverse_transform", [as_array(X, "X", self)]))


def predict_proba(self, X):
    """Class probabilities of the samples in X, columns in the order of classes_."""
    return _first(self._call("predict_proba", [self._input(X)]))


def predict_log_proba(self, X):
    """Logarithm of the class probabilities of the samples in X."""
    return _first(self._call("predict_log_proba", [self._input(X)]))


def decision_function(self, X):
    """Confidence scores of the samples in X (signed distances to the boundary)."""
    return _first(self._call("decision_function", [self._input(X)]))


def score_samples(self, X):
    """Per-sample score of X (the log-likelihood under the model)."""
    return _first(self._call("score_samples", [self._input(X)]))


def score(self, X, y=None, sample_weight=None):
    """The estimator's default score on X (and y): R^2 for regressors, the average
    log-likelihood for PCA, the opposite of the inertia for KMeans."""
    inputs = [self._input(X)]
    names = [i["name"] for i in (self._method("score") or {}).get("inputs", [])]
    if "y" in names or not names:
        inputs.append(None if y is None else as_array(y, "y", self))
    if sample_weight is not None:
        inputs += [None] * (3 - len(inputs))
        inputs[2] = as_array(sample_weight, "sample_weight", self)
    return float(_first(self._call("score", inputs)))


def fit_transform(self, X, y=None, **fit_params):
    """Fit to X, then return X transformed (in one engine call where it has one)."""
    if self._method("fit_transform") is None:
        return self.fit(X, y, **fit_params).transform(X)
    names = _fit_feature_names(X)
    sample_weight = fit_params.pop("sample_weight", None)
    inputs = self._fit_arrays(X, y, sample_weight, fit_params)
    out = _first(self._call("fit_transform", inputs, progress=True))
    self._finish_fit(names)
    return out


def _fit_sw(self, X, y=None, sample_weight=None):
    """Fit the model to X (and y), with optional per-sample weights."""
    return self._fit(X, y, sample_weight)


def _fit_plain(self, X, y=None):
    """Fit the model to X (and y)."""
    return self._fit(X, y)


def fit_predict(self, X, y=None, sample_weight=None, **fit_params):
    """Fit to X, then return the label of each sample."""
    if hasattr(type(self), "_has_labels"):
        return self.fit(X, y, sample_weight=sample_weight, **fit_params).labels_
    return self.fit(X, y).predict(X)


def kneighbors(self, X=None, n_neighbors=None, return_distance=True):
    """The n_neighbors nearest training samples of each row of X (of each training
    sample, itself excluded, when X is None): (distances, indices), or indices."""
    options = {"return_distance": bool(return_distance)}
    if n_neighbors is not None:
        options["n_neighbors"] = int(n_neighbors)
    res = self._call("kneighbors", [self._input(X)], options)
    if return_distance:
        return res["distances"], res["indices"]
    return res["indices"]


def get_covariance(self):
    """The data covariance the fitted model implies."""
    return _first(self._call("get_covariance", []))


def get_precision(self):
    """The data precision matrix (inverse covariance) the fitted model implies."""
    return _first(self._call("get_precision", []))


_METHODS = {fn.__name__: fn for fn in (
    predict, transform, inverse_transform, predict_proba, predict_log_proba,
    decision_function, score_samples, score, fit_transform, fit_predict, kneighbors,
    get_covariance, get_precision)}


def _named_method(fn, name, cls_name, module):
    """A copy of fn that is, by every name Python and scikit-learn read, the method
    cls_name.name: __name__, __qualname__, __module__ and the code object's name (which
    tracebacks show).  A copy, so each class owns its methods."""
    code = fn.__code__.replace(co_name=name)
    if hasattr(code, "co_qualname"):  # Python 3.11+
        code = code.replace(co_qualname=f"{cls_name}.{name}")
    out = types.FunctionType(code, fn.__globals__, name, fn.__defaults__, fn.__closure__)
    out.__kwdefaults__ = fn.__kwdefaults__
    out.__qualname__ = f"{cls_name}.{name}"
    out.__module__ = module
    out.__doc__ = fn.__doc__
    return out


# ---- attributes scikit-learn sets that are not arrays (the engine keeps arrays) -------

_METRIC_NAMES = {"l2": "euclidean", "l1": "manhattan", "cityblock": "manhattan"}


def _effective_metric(est):
    metric = _METRIC_NAMES.get(est.metric, est.metric)
    if metric == "minkowski" and est.p in (1, 2):
        metric = "euclidean" if est.p == 2 else "manhattan"
    return metric


def _python_attrs(est):
    name = type(est).__name__
    if name == "Ridge":
        est.n_iter_ = None
        est.solver_ = ("lbfgs" if est.positive else "cholesky") if est.solver == "auto" \
            else est.solver
    elif name == "PCA" and hasattr(est, "components_"):
        est.noise_variance_ = est.components_.dtype.type(est.noise_variance_)
    elif name == "StandardScaler" and not est.with_std:
        est.var_ = est.scale_ = None
        if not est.with_mean:
            est.mean_ = None
    elif name in ("NearestNeighbors", "KNeighborsClassifier", "KNeighborsRegressor"):
        est.effective_metric_ = _effective_metric(est)
        est.effective_metric_params_ = dict(est.metric_params or {})
        if hasattr(est, "outputs_2d_"):
            est.outputs_2d_ = bool(est.outputs_2d_)
    elif name in ("Lasso", "ElasticNet", "LassoCV", "ElasticNetCV"):
        if isinstance(getattr(est, "n_iter_", None), np.ndarray):  # one per target: a list
            est.n_iter_ = [int(v) for v in est.n_iter_]
        if name in ("Lasso", "ElasticNet") and hasattr(est, "coef_"):
            from scipy import sparse
            est.sparse_coef_ = sparse.csr_array(np.atleast_2d(est.coef_))
        if name == "ElasticNetCV" and hasattr(est, "mse_path_"):
            n_l1, n_alphas = np.atleast_1d(est.l1_ratio).size, est.alphas_.shape[-1]
            if n_l1 > 1 and n_alphas > 1:  # the engine's 2-D (n_l1 * n_alphas, n_folds)
                est.mse_path_ = est.mse_path_.reshape(n_l1, n_alphas, -1)
    elif name in ("SVC", "SVR"):
        if hasattr(est, "shape_fit_"):
            est.shape_fit_ = tuple(int(v) for v in np.ravel(est.shape_fit_))


# ---- classifiers: any label type in and out -----------------------------------------

class _ClassifierLabels:
    """Numeric labels go to the engine as they are; others (strings, objects) are
    encoded to 0..K-1 first and decoded on the way out."""

    def _encode_y_for_fit(self, y):
        if isinstance(y, DataHandle):
            # numeric labels the engine reads directly; predictions come back in the
            # handle's dtype, as they would for the array it was made from
            if y.ndim != 1:
                raise ValueError(f"y should be a 1d array, got an array of shape {y.shape} "
                                 f"instead.")
            if y.dtype.kind not in "iuf":
                raise TypeError(f"a DataHandle y must hold numeric labels, not {y.dtype}")
            self.__dict__["_gsb_labels"] = (None, y.dtype)
            return y
        if _devarray.is_device_array(y):  # labels are encoded on the host
            y = _devarray.to_host(y)
        if hasattr(y, "to_numpy"):
            y = y.to_numpy()
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            warnings.warn("A column-vector y was passed when a 1d array was expected. "
                          "Please change the shape of y to (n_samples,), for example using "
                          "ravel().", DataConversionWarning, stacklevel=3)
            y = y.ravel()
        if y.ndim != 1:
            raise ValueError(f"y should be a 1d array, got an array of shape {y.shape} "
                             f"instead.")
        if y.dtype.kind in "iubf":
            if y.dtype.kind == "f":
                if np.isnan(y).any():
                    raise ValueError("Input y contains NaN.")
                if not np.isfinite(y).all():
                    raise ValueError("Input y contains infinity or a value too large for "
                                     "dtype('float64').")
                if np.any(y != np.round(y)):
                    raise ValueError(
                        "Unknown label type: continuous. Maybe you are trying to fit a "
                        "classifier, which expects discrete classes on a regression target "
                        "with continuous values.")
            self.__dict__["_gsb_labels"] = (None, y.dtype)
            return y.astype(np.float64)
        classes, codes = np.unique(y, return_inverse=True)
        self.__dict__["_gsb_labels"] = (classes, None)
        return codes.astype(np.float64)

    def _after_fit(self):
        classes, dtype = self.__dict__.get("_gsb_labels", (None, None))
        self.classes_ = classes if classes is not None else self.classes_.astype(
            dtype or np.float64)

    def _label_meta(self):
        classes, dtype = self.__dict__.get("_gsb_labels", (None, None))
        if classes is None:
            return {"labels": {"dtype": np.dtype(dtype or np.float64).str}}
        return {"labels": {"classes": classes.tolist(), "dtype": classes.dtype.str}}

    def _restore_labels(self, labels):
        labels = labels or {}
        dtype = np.dtype(labels.get("dtype", "<f8"))
        if "classes" in labels:
            classes = np.asarray(labels["classes"], dtype=dtype)
            self.__dict__["_gsb_labels"] = (classes, None)
            self.classes_ = classes
        else:
            self.__dict__["_gsb_labels"] = (None, dtype)
            self.classes_ = self.classes_.astype(dtype)

    def _decode_y(self, y):
        classes, dtype = self.__dict__.get("_gsb_labels", (None, None))
        y = np.asarray(y)
        if classes is not None:
            return classes[y.astype(np.intp)]
        return y.astype(dtype or np.float64)

    def score(self, X, y, sample_weight=None):
        """Mean accuracy on X against the labels y (scikit-learn's ClassifierMixin.score)."""
        if not isinstance(y, DataHandle):
            if _devarray.is_device_array(y):  # scikit-learn's accuracy reads host labels
                y = _devarray.to_host(y)
            return ClassifierMixin.score(self, X, y, sample_weight)
        # y lives in the engine: its accuracy there, on the labels as they were put
        classes, _ = self.__dict__.get("_gsb_labels", (None, None))
        if classes is not None:
            raise TypeError(f"this {type(self).__name__} was fitted on non-numeric labels; "
                            f"score it with y as an array of those labels, not a DataHandle")
        return score(self, X, y, sample_weight)


class _PlainLabels:
    def _decode_y(self, y):
        return y

    def _restore_labels(self, labels):
        pass


# ---- the class factory ----------------------------------------------------------------

_KIND_MIXINS = {
    "classifier": (_ClassifierLabels, ClassifierMixin),
    "regressor": (_PlainLabels, RegressorMixin),
    "transformer": (_PlainLabels, TransformerMixin),
    "clusterer": (_PlainLabels, ClusterMixin),
    "neighbors": (_PlainLabels,),
}


def _default(p):
    value = p["default"]
    if "pair" in p["types"] and isinstance(value, list):
        return tuple(value)
    return value


# regressors whose engine fit takes a 2-D y (several targets)
_MULTI_OUTPUT = {"LinearRegression", "Ridge", "KNeighborsRegressor", "Lasso", "ElasticNet"}


# get_feature_names_out (and with it set_output) of the transformers, as scikit-learn's
# classes of the same name have it: one output column per input column, or columns named
# by the class ("pca0", "pca1" ...) counted by a fitted attribute.  An estimator with a
# transform that is not listed has neither (as scikit-learn's LabelEncoder).
_FEATURES_OUT = {
    "StandardScaler": None,
    "MinMaxScaler": None,
    "PCA": ("components_", 0),
    "TruncatedSVD": ("components_", 0),
    "KMeans": ("cluster_centers_", 0),
    "TSNE": ("embedding_", 1),
}


def _features_out_attrs(name):
    """(mixin, class attributes) giving the class get_feature_names_out, or (None, {})."""
    if name not in _FEATURES_OUT:
        return None, {}
    if _FEATURES_OUT[name] is None:
        return OneToOneFeatureMixin, {}
    counted_by, axis = _FEATURES_OUT[name]  # the output columns: that attribute's axis

    def _n_features_out(self):
        return getattr(self, counted_by).shape[axis]
    return ClassNamePrefixFeaturesOutMixin, {"_n_features_out": property(_n_features_out)}


def make_class(desc, module):
    """Build the Python class for one engine estimator descriptor."""
    name = desc["name"]
    params = desc["params"]
    defaults = {p["name"]: _default(p) for p in params}
    args = ", ".join(f"{p['name']}=_d[{p['name']!r}]" for p in params)
    body = "".join(f"    self.{p['name']} = {p['name']}\n" for p in params) or "    pass\n"
    namespace = {"_d": defaults}
    exec(f"def __init__(self, {args}):\n{body}", namespace)  # noqa: S102 - our own text
    init = namespace["__init__"]
    init.__qualname__ = f"{name}.__init__"
    init.__module__ = module

    attrs = {"__init__": init, "_gsb_desc": desc, "__module__": module,
             "__doc__": _docstring(desc)}
    for m in desc["methods"]:
        fn = _METHODS.get(m["name"])
        if m["name"] == "fit":
            takes_weights = any(i["name"] == "sample_weight" for i in m["inputs"])
            fn = _fit_sw if takes_weights else _fit_plain
        if fn is not None:
            attrs[m["name"]] = _named_method(fn, m["name"], name, module)

    bases = _KIND_MIXINS.get(desc["kind"], (_PlainLabels,))
    if "transform" in attrs and TransformerMixin not in bases:
        bases = bases + (TransformerMixin,)
    features_mixin, features_attrs = _features_out_attrs(name)
    if features_mixin is not None:
        bases = (features_mixin,) + bases
        attrs.update(features_attrs)
    if desc["kind"] == "clusterer":
        attrs["_has_labels"] = True
    if desc["kind"] == "classifier" and "score" in attrs:
        del attrs["score"]  # ClassifierMixin's accuracy on decoded labels
    cls = type(name, bases + (GsbEstimator,), attrs)
    _output.install(cls, desc.get("attributes", []))  # gsb.set_config(output_type=...)
    if name in _MULTI_OUTPUT:
        def __sklearn_tags__(self):
            tags = super(cls, self).__sklearn_tags__()
            tags.target_tags.multi_output = True
            return tags
        cls.__sklearn_tags__ = __sklearn_tags__
    return cls


def _docstring(desc):
    lines = [desc.get("doc") or desc["name"], "", "Parameters", "----------"]
    for p in desc["params"]:
        lines.append(f"{p['name']} : {' | '.join(p['types'])}, default={p['default']!r}")
        if p.get("doc"):
            lines.append(f"    {p['doc']}")
    lines += ["", "Runs on the gsb engine (embedded by default; see gsb.set_config)."]
    return "\n".join(lines)
