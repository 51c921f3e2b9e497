"""GSB_PROFILE=1: each method call prints its phases and total on stderr
(core/profile.h), on whichever device the suite runs; off, nothing is printed."""
import os
import re

from conftest import run_with_shim

DEVICE = os.environ.get("GSB_DEVICE", "cpu")
CODE = (
    "import numpy as np, gsb\n"
    f"gsb.set_config(device={DEVICE!r})\n"
    "from gsb.cluster import DBSCAN\n"
    "X = np.random.default_rng(0).standard_normal((400, 2))\n"
    "DBSCAN(eps=0.3, min_samples=5).fit(X)\n")
PHASES = ["search set up", "neighbour counts", "neighbourhoods kept", "core components",
          "border samples", "(rest)", "total"]


def _lines(out):
    assert out.returncode == 0, out.stderr
    return [line for line in out.stderr.splitlines() if line.startswith("gsb profile:")]


def test_profile_prints_each_phase_and_the_total():
    lines = _lines(run_with_shim(CODE, GSB_PROFILE="1"))
    found = {}
    for line in lines:
        m = re.fullmatch(r"gsb profile: DBSCAN\.fit \[(\w+)\] (.+) ([0-9.]+) ms", line)
        assert m, line
        found[m.group(2)] = float(m.group(3))
    assert list(found) == PHASES
    assert all(v >= 0 for v in found.values())
    parts = sum(v for k, v in found.items() if k != "total")
    assert abs(parts - found["total"]) <= 0.05 + 1e-3 * found["total"]


def test_profile_off_prints_nothing():
    assert _lines(run_with_shim(CODE, GSB_PROFILE="0")) == []
    assert _lines(run_with_shim(CODE, GSB_PROFILE="")) == []


LOGISTIC = (
    "import numpy as np, gsb\n"
    f"gsb.set_config(device={DEVICE!r})\n"
    "from gsb.linear_model import LogisticRegression\n"
    "rng = np.random.default_rng(0)\n"
    "X = rng.standard_normal((500, 4))\n"
    "y = (X[:, 0] + 0.5 * rng.standard_normal(500) > 0).astype(float)\n"
    "print(LogisticRegression().fit(X, y).n_iter_[0])\n")


def test_profile_logistic_counts_the_solver_work():
    """LogisticRegression's phases: host label work, the upload, X's check, and the
    solver with its iterations (n_iter_) and evaluations (one host wait each on a GPU)."""
    out = run_with_shim(LOGISTIC, GSB_PROFILE="1")
    lines = _lines(out)
    phases = [re.fullmatch(r"gsb profile: LogisticRegression\.fit \[\w+\] (.+) [0-9.]+ ms",
                           line) for line in lines if "LogisticRegression.fit" in line]
    assert all(phases), lines
    names = [m.group(1) for m in phases]
    # on a GPU X uploads while the host finds the classes
    assert names[:3] in (["classes and weights (host)", "upload X, y, sample weights",
                          "X checked for NaN / infinity"],
                         ["classes and weights (host) while X uploads",
                          "upload y, sample weights", "X checked for NaN / infinity"])
    m = re.fullmatch(r"L-BFGS: (\d+) iterations, (\d+) evaluations \(host waits\)", names[3])
    assert m, names
    n_iter = int(out.stdout.split()[-1])
    assert int(m.group(1)) == n_iter and int(m.group(2)) >= n_iter
    assert names[4:] == ["(rest)", "total"]
