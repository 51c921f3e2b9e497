"""The pictures: bench/plot.py draws bench/compare.py's tables (printed, in RESULTS.md, or
its --json), and examples/kmeans_blobs.py draws the clustering example of
docs/PYTHON.md.  Skipped where matplotlib is missing (tools/install-python.sh installs
it for the test suite)."""
import json
import os
import subprocess
import sys

import pytest

matplotlib = pytest.importorskip("matplotlib")

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
BENCH = os.path.join(ROOT, "bench")
sys.path.insert(0, BENCH)
import compare  # noqa: E402
import plot  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


def _png_size(path):
    """(width, height) of a PNG, read from its IHDR chunk."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == PNG, f"{path} is not a PNG"
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def _case(name, goal=None):
    return (name, "Est", {}, None, 5000, 20, "none", 0, "transform", goal)


def _row(name, dtype, sk_fit, g_fit, sk_pred, g_pred):
    """compare.result_row from (fit ms, method ms, n_iter) of each side, no n_iter."""
    return compare.result_row(_case(name, 0.83), dtype, (sk_fit, sk_pred, None),
                              (g_fit, g_pred, None))


ROWS = [_row("StandardScaler 5000 x 20", "float32", 2.0, 0.5, 1.0, 0.4),
        _row("KMeans(20) 5000 x 20", "float32", 6.0, 9.0, 1.0, 0.5),
        _row("PCA(16) 5000 x 20", "float64", 7.0, 1.5, 2.0, 1.0)]


def _printed_table(rows, session="local?device=cpu"):
    return "\n".join([
        "# 2026-11-25  vm  2 cores  x86_64  scikit-learn 1.9.1  numpy 2.4.6",
        "# command: python3 bench/compare.py --suite small", f"# gsb session: {session}",
        compare.TABLE_HEAD] + [compare.table_line(r) for r in rows]) + "\n"


def test_printed_tables_read_back_as_the_json_rows():
    table, = plot.parse_tables("Some text.\n\n" + _printed_table(ROWS) + "\nAfter.\n")
    assert [r["case"] for r in table["rows"]] == [r["case"] for r in ROWS]
    for got, want in zip(table["rows"], ROWS):
        assert got["fit_ratio"] == pytest.approx(want["fit_ratio"], abs=0.005)
        assert got["pred_ratio"] == pytest.approx(want["pred_ratio"], abs=0.005)
        assert (got["target"], got["target_met"]) == (want["target"], want["target_met"])
    assert ROWS[1]["target_met"] is False  # 6 ms against 9 ms misses 0.83x
    assert plot.device_of(table["meta"]) == "CPU" and plot.suite_of(table["meta"]) == "small"
    gpu, = plot.parse_tables(_printed_table(ROWS, "local?device=cuda"))
    assert plot.device_of(gpu["meta"]) == "GPU"


@pytest.mark.parametrize("form", ["json", "printed"])
def test_plot_draws_a_png(tmp_path, form):
    src = tmp_path / f"results.{form}"
    if form == "json":
        meta = {"date": "2026-11-25", "cores": 2, "suite": "gpu",
                "command": "python3 bench/compare.py --suite gpu",
                "session": "local?device=cuda"}
        gpu_rows = [dict(r, target=t) for r, t in zip(ROWS, (5, 100, 50))]
        src.write_text(json.dumps({"meta": meta, "rows": gpu_rows}))
    else:
        src.write_text(_printed_table(ROWS))
    out = tmp_path / "ratios.png"
    assert plot.main([str(src), "-o", str(out)]) == 0
    width, height = _png_size(out)
    assert width > 600 and height > 200 and out.stat().st_size > 10_000


def test_default_names_say_suite_and_device():
    table = {"meta": {"command": "x --suite gpu", "session": "local?device=cuda"}}
    assert plot.default_output(table).endswith(os.path.join("bench", "ratios-gpu.png"))
    table = {"meta": {"command": "x --suite small", "session": "local?device=cpu"}}
    assert plot.default_output(table).endswith("ratios-small-cpu.png")


def test_results_md_tables_and_their_pictures():
    with open(os.path.join(BENCH, "RESULTS.md"), encoding="utf-8") as f:
        results = f.read()
    tables = plot.parse_tables(results)
    assert {plot.device_of(t["meta"]) for t in tables} >= {"CPU", "GPU"}
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    for name in ("ratios-small-cpu.png", "ratios-cpu.png", "ratios-gpu.png"):
        assert f"({name})" in results and f"(bench/{name})" in readme, name
        _png_size(os.path.join(BENCH, name))


def test_clustering_example_draws_its_picture(tmp_path):
    out = tmp_path / "blobs.png"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "kmeans_blobs.py"),
                        str(out)], capture_output=True, text=True, env=os.environ.copy(),
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "adjusted Rand index against the blobs 1.000" in r.stdout
    assert _png_size(out) == (640, 480)
    with open(os.path.join(ROOT, "docs", "PYTHON.md"), encoding="utf-8") as f:
        assert "images/kmeans-blobs.png" in f.read()
    _png_size(os.path.join(ROOT, "docs", "images", "kmeans-blobs.png"))
