"""cuML's estimator classes on gsb: each is a subclass of gsb's class of the same name
that adds cuML's output_type parameter and applies it (see _output) to what its
methods return and to its fitted attributes, as cuML does.

    cuml.cluster.KMeans(n_clusters=3, output_type="pandas").fit(X).cluster_centers_

isinstance(cuml.cluster.KMeans(), gsb.cluster.KMeans) holds; the classes pickle as
cuml.cluster.KMeans and clone with their output_type.
"""
import functools
import importlib
import inspect

from gsb import _output as _gsb_output
from sklearn.utils._available_if import _AvailableIfDescriptor, available_if

from . import _output

_CONVERTED = _gsb_output.CONVERTED
_FITS = _gsb_output.FITS
_PASSED_THROUGH = _gsb_output.PASSED_THROUGH


class _FittedArray(_gsb_output.FittedArray):
    """A fitted attribute (coef_, cluster_centers_ ...) read in cuML's output type."""

    def kind_for(self, obj):
        return _output.resolve(obj.__dict__.get("output_type"),
                               obj.__dict__.get("_cuml_input_type"))


def _first_array(args, kwargs, name):
    if args:
        return args[0]
    return kwargs.get(name)


def _wrap(name, fn):
    """fn with cuML's API boundary: the outermost call records (fits) or converts."""
    fits, converts = name in _FITS, name in _CONVERTED
    names = [p for p in inspect.signature(fn).parameters if p != "self"]
    arg = names[0] if names else "X"  # the array the output mirrors (LabelEncoder: y)

    @functools.wraps(fn)
    def method(self, *args, **kwargs):
        X = _first_array(args, kwargs, arg)
        with _output.api_call() as outermost:
            if outermost and fits:
                _output.check_output_type(self.output_type)
                self.__dict__["_cuml_input_type"] = _output.input_kind(X)
            result = fn(self, *args, **kwargs)
        if not outermost or not converts or result is self:
            return result
        mirror = self.__dict__.get("_cuml_input_type") if X is None else \
            _output.input_kind(X)
        kind = _output.resolve(self.output_type, mirror)
        return result if kind[0] == "numpy" else \
            _output.convert(result, kind, getattr(X, "index", None))
    return method


def _init_for(base):
    """__init__ taking base's parameters and output_type=None (keyword only), and the
    cuML-only parameters base's engine takes (base._cuml_params: the forests' n_bins)."""
    signature = inspect.signature(base.__init__)
    params = list(signature.parameters.values())
    extra = dict(getattr(base, "_cuml_params", {}))
    for name, default in [*extra.items(), ("output_type", None)]:
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default))

    def __init__(self, *args, output_type=None, **kwargs):
        cuml_values = {name: kwargs.pop(name, default) for name, default in extra.items()}
        base.__init__(self, *args, **kwargs)
        self.__dict__.update(cuml_values)
        self.output_type = output_type
    __init__.__signature__ = signature.replace(parameters=params)
    __init__.__qualname__ = f"{base.__name__}.__init__"
    return __init__


def cuml_class(base, module):
    """The cuML flavour of gsb estimator class base, living in module ('cuml.cluster')."""
    desc = getattr(base, "_gsb_desc", None)
    if desc is None:  # not an engine class: nothing to add
        return base
    attrs = {"__module__": module, "__qualname__": base.__name__, "__doc__":
             (base.__doc__ or "") + "\n\noutput_type : {'input', 'numpy', 'cupy', 'numba', "
             "'pandas', 'cudf', 'array', 'dataframe', 'series', 'df_obj'} or None, "
             "default=None\n    Type of results and fitted attributes (cuML's; None: the "
             "global setting, else 'input').", "__init__": _init_for(base)}
    for name in set(desc.get("attributes", [])) | {"classes_"}:
        attrs[name] = _FittedArray(name)
    cls = type(base.__name__, (base,), attrs)
    # methods set after the class exists: scikit-learn's set_output wrapping (done on
    # class creation) already sits inside gsb's methods and must not run twice
    for name in _CONVERTED + _FITS + _PASSED_THROUGH:
        raw = inspect.getattr_static(base, name, None)
        if isinstance(raw, _AvailableIfDescriptor):  # SVC.predict_proba: keep the condition
            setattr(cls, name, available_if(raw.check)(_wrap(name, raw.fn)))
            continue
        fn = getattr(base, name, None)
        if callable(fn):
            setattr(cls, name, _wrap(name, fn))
    return cls


@functools.lru_cache(maxsize=None)
def _classes(group):
    gsb_module = importlib.import_module(f"gsb.{group}")
    return {name: cuml_class(getattr(gsb_module, name), f"cuml.{group}")
            for name in gsb_module.__all__}


def export(group, namespace):
    """Fill the namespace of cuml.<group> with its classes; returns its __all__."""
    classes = _classes(group)
    namespace.update(classes)
    return sorted(classes)
