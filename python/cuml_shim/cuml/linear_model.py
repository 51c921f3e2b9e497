"""cuml.linear_model: gsb's linear_model estimators with cuML's output_type (see cuml._classes)."""
from ._classes import export as _export

__all__ = _export("linear_model", globals())
