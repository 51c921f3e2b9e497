"""Every engine estimator as a Python class, grouped by cuML/scikit-learn module.

Estimators the original project offered but the engine does not implement
yet get a class that raises NotImplementedError naming it, so imports work
and nothing silently falls back to another library.
"""
from . import _lib
from ._estimator import make_class
from ._extra_methods import patch

MODULES = ("linear_model", "cluster", "decomposition", "neighbors", "preprocessing", "svm",
           "ensemble", "manifold")

PLANNED = {
    "svm": ["SVC", "SVR"],
    "cluster": ["DBSCAN"],
}


def _planned_class(name, module):
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(
            f"{name} is not implemented in gsb {_lib.version()} yet; no fallback is used. "
            f"Implemented estimators: {', '.join(sorted(ALL))}")
    return type(name, (), {"__init__": __init__, "__module__": f"gsb.{module}",
                           "__doc__": f"{name}: not implemented in gsb yet."})


def _build():
    by_module = {m: {} for m in MODULES}
    for desc in _lib.info()["estimators"]:
        module = desc["module"]
        by_module.setdefault(module, {})[desc["name"]] = patch(make_class(desc, f"gsb.{module}"))
    from ._label import make_label_encoder
    prep = by_module["preprocessing"]
    if "LabelEncoder" in prep:
        prep["LabelEncoder"] = make_label_encoder(prep["LabelEncoder"])
    from ._forest import patch as patch_forests
    patch_forests(by_module["ensemble"])
    from ._umap import make_umap
    if "UMAP" in by_module["manifold"]:
        by_module["manifold"]["UMAP"] = make_umap(by_module["manifold"]["UMAP"])
    for module, names in PLANNED.items():
        for name in names:
            by_module[module].setdefault(name, _planned_class(name, module))
    return by_module


BY_MODULE = _build()
ALL = {name: cls for classes in BY_MODULE.values() for name, cls in classes.items()
       if hasattr(cls, "_gsb_desc")}
