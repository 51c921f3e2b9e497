"""cuml.ensemble: gsb's ensemble estimators with cuML's output_type (see cuml._classes)."""
from ._classes import export as _export

__all__ = _export("ensemble", globals())
