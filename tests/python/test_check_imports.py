"""tools/check-imports: finds include and import circles and layer breaches, names them,
and lets deferred lazy imports of the PEP 562 kind through (small synthetic trees)."""
import os
import subprocess
import sys
import textwrap

import pytest

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "tools",
                    "check-imports")


def tree(root, files):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def check(root, only):
    p = subprocess.run([sys.executable, TOOL, "--root", str(root), "--only", only],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


CLEAN_C = {
    "src/core/model.h": '#include "core/arena.h"\n',
    "src/core/model.c": '#include "core/model.h"\n#include "backend/backend.h"\n',
    "src/core/arena.h": "",
    "src/core/arena.c": '#include "core/arena.h"\n',
    "src/backend/backend.h": '#include "gsb.h"\n',
    "src/backend/cpu/cpu_x.c": '#include "cpu_x.c"\n#include "../backend.h"\n',
    "src/net/wire.c": '#include "core/model.h"\n',
    "src/session/remote.c": '#include "net/wire.h"\n#include "core/model.h"\n',
    "src/net/wire.h": "",
}


def test_clean_src_passes(tmp_path):
    tree(tmp_path, CLEAN_C)
    assert check(tmp_path, "src") == (0, "")


def test_include_circle_between_modules(tmp_path):
    # model.h -> arena.h, arena.c -> model.h: the modules core/arena and core/model
    tree(tmp_path, {**CLEAN_C, "src/core/arena.c": '#include "core/arena.h"\n'
                                                   '#include "core/model.h"\n'})
    rc, out = check(tmp_path, "src")
    assert rc == 1
    assert "include circle: core/arena -> core/model -> core/arena" in out
    assert 'src/core/arena.c includes "core/model.h"' in out
    assert 'src/core/model.h includes "core/arena.h"' in out


@pytest.mark.parametrize("include", ["net/wire.h", "session/remote.h", "server/server.h"])
def test_engine_including_the_layers_above(tmp_path, include):
    tree(tmp_path, {**CLEAN_C, f"src/{include}": "",
                    "src/core/data.c": f'#include "{include}"\n'})
    rc, out = check(tmp_path, "src")
    assert rc == 1
    assert f'layer breach: src/core/data.c includes "{include}"' in out


def test_engine_calling_the_remote_client(tmp_path):
    tree(tmp_path, {**CLEAN_C, "src/core/data.c": "/* gsb__remote_ping in a comment is fine */\n"
                                                  'static const char *s = "gsb__remote_x";\n'
                                                  "int f(void) { return gsb__remote_ping(0); }\n"})
    rc, out = check(tmp_path, "src")
    assert rc == 1
    assert "src/core/data.c names gsb__remote_ping" in out
    assert "gsb__remote_x" not in out


def pkg(files):
    return {f"python/gsb/{k}": v for k, v in files.items()}


def test_python_clean(tmp_path):
    tree(tmp_path, pkg({"__init__.py": "from . import _a\nfrom ._b import x\n",
                        "_a.py": "import numpy\nfrom gsb import _b\n",
                        "_b.py": "x = 1\n\ndef f():\n    import tqdm\n"}))
    assert check(tmp_path, "python") == (0, "")


def test_python_circle_at_module_level(tmp_path):
    tree(tmp_path, pkg({"__init__.py": "", "_a.py": "from ._b import x\n",
                        "_b.py": "import gsb._a\nx = 1\n"}))
    rc, out = check(tmp_path, "python")
    assert rc == 1
    assert "import circle: gsb._a -> gsb._b -> gsb._a" in out
    assert "python/gsb/_b.py:1 import gsb._a" in out


def test_python_circle_hidden_in_a_function_counts(tmp_path):
    tree(tmp_path, pkg({"__init__.py": "", "_est.py": "from ._data import Handle\n",
                        "_data.py": "class Handle:\n    def __init__(self):\n"
                                    "        from ._est import conv\n"}))
    rc, out = check(tmp_path, "python")
    assert rc == 1
    assert "gsb._data -> gsb._est -> gsb._data" in out


def test_python_package_init_from_a_submodule(tmp_path):
    # `from . import name` where name is no submodule: the package itself, a real circle
    tree(tmp_path, pkg({"__init__.py": "from ._a import f\nVALUE = 1\n",
                        "_a.py": "from . import VALUE\n\ndef f():\n    pass\n"}))
    rc, out = check(tmp_path, "python")
    assert rc == 1
    assert "gsb -> gsb._a -> gsb" in out


def test_python_lazy_loading_is_not_a_circle(tmp_path):
    tree(tmp_path, pkg({
        "__init__.py": "from typing import TYPE_CHECKING\nfrom . import _a\n"
                       "if TYPE_CHECKING:\n    from ._b import B\n"
                       "def __getattr__(name):\n    from . import _b\n    return _b.B\n",
        "_a.py": "",
        "_b.py": "from . import _a\nimport gsb\nB = 1\n"}))
    assert check(tmp_path, "python") == (0, "")


def test_the_shim_counts_too(tmp_path):
    tree(tmp_path, {**pkg({"__init__.py": "import cuml\n"}),
                    "python/cuml_shim/cuml/__init__.py": "import gsb\n"})
    rc, out = check(tmp_path, "python")
    assert rc == 1
    assert "cuml -> gsb -> cuml" in out


def test_this_repository_src_is_clean():
    rc, out = check(os.path.join(os.path.dirname(TOOL), os.pardir), "src")
    assert (rc, out) == (0, "")
