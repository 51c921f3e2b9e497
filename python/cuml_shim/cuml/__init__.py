"""cuml compatibility shim: `import cuml` runs on gsb where RAPIDS cuML is absent.

Installed only by choice (pip install ./python/cuml_shim).  If a real cuML is
installed too, this shim refuses to hide it silently: set GSB_CUML_SHIM=1 to
use the shim anyway, otherwise the import fails and names both locations.

The estimators are gsb's with cuML's output_type parameter (cuml._classes);
cuml.set_global_output_type and cuml.using_output_type set it for all of them
(cuml._output).
"""
import os as _os
import sys as _sys


def _real_cuml_elsewhere():
    here = _os.path.dirname(_os.path.abspath(__file__))
    for entry in _sys.path:
        candidate = _os.path.join(entry or ".", "cuml", "__init__.py")
        if _os.path.isfile(candidate) and _os.path.dirname(_os.path.abspath(candidate)) != here:
            with open(candidate, encoding="utf-8", errors="replace") as f:
                if "gsb compatibility shim" not in f.read(4096):
                    return _os.path.dirname(candidate)
    return None


_real = _real_cuml_elsewhere()
if _real and _os.environ.get("GSB_CUML_SHIM") != "1":
    raise ImportError(
        f"the gsb cuml shim ({_os.path.dirname(__file__)}) is shadowing a real cuML "
        f"installation at {_real}. Uninstall the shim (pip uninstall gsb-cuml-shim) to use "
        f"RAPIDS cuML, or set GSB_CUML_SHIM=1 to use gsb deliberately.")

import gsb as _gsb  # noqa: E402

from . import (cluster, decomposition, ensemble, linear_model, manifold,  # noqa: E402,F401
               neighbors, preprocessing, svm)
from ._output import (global_settings, set_global_output_type,  # noqa: E402,F401
                      using_output_type)
from .cluster import *  # noqa: E402,F401,F403
from .decomposition import *  # noqa: E402,F401,F403
from .ensemble import *  # noqa: E402,F401,F403
from .linear_model import *  # noqa: E402,F401,F403
from .manifold import *  # noqa: E402,F401,F403
from .neighbors import *  # noqa: E402,F401,F403
from .preprocessing import *  # noqa: E402,F401,F403
from .svm import *  # noqa: E402,F401,F403

# the cuML API level gsb follows, with gsb's version as a local label: the engine's
# string, which gsbd's /health reports as cuml_version too
__version__ = _gsb.info()["cuml_version"]
__gsb_shim__ = True
