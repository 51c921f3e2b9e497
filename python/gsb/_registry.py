"""Every engine estimator as a Python class, grouped by cuML/scikit-learn module."""
from . import _lib
from ._estimator import make_class
from ._extra_methods import patch

MODULES = ("linear_model", "cluster", "decomposition", "neighbors", "preprocessing", "svm",
           "ensemble", "manifold")

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
    from ._neighbors_extra import install
    install(by_module)
    from ._umap import make_umap
    if "UMAP" in by_module["manifold"]:
        by_module["manifold"]["UMAP"] = make_umap(by_module["manifold"]["UMAP"])
    return by_module


BY_MODULE = _build()
ALL = {name: cls for classes in BY_MODULE.values() for name, cls in classes.items()
       if hasattr(cls, "_gsb_desc")}
