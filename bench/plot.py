#!/usr/bin/env python3
"""plot.py - draw bench/compare.py's results: scikit-learn time / gsb time per case.

    python3 bench/plot.py results.json                        # compare.py --json
    python3 bench/plot.py compare-output.txt                  # its printed table
    python3 bench/plot.py bench/RESULTS.md --match 'suite small' --device CPU
                                                              # a table of RESULTS.md

One horizontal bar pair per case (fit, predict) on a log scale: right of the
grey line at 1x gsb is faster.  A case with a target (the GPU suite's
speed-ups, the small suite's "at most 1.2x scikit-learn's time" = 0.83x) gets
a red goal mark on its row (a red line when every case shares it); a case
that misses it has its name in red.  Matplotlib's Agg backend: no display.
"""
import argparse
import json
import os
import re
import sys

COLUMNS = ("case", "dtype", "sklearn_fit_ms", "gsb_fit_ms", "fit_ratio", "sklearn_pred_ms",
           "gsb_pred_ms", "pred_ratio", "target")


# ---- reading ---------------------------------------------------------------------------

def _row(cells):
    """A table line's cells as compare.py's JSON row."""
    r = dict(zip(COLUMNS, cells))
    for key in COLUMNS[2:8]:  # "-": not measured (a fit-only case, or no scikit-learn run)
        r[key] = None if r[key] in ("-", "") else float(r[key].rstrip("x"))
    m = re.match(r">=\s*([\d.]+)x:\s*(met|MISSED)", r["target"])
    r["target"], r["target_met"] = (float(m.group(1)), m.group(2) == "met") if m else \
        (None, None)
    return r


def parse_tables(text):
    """Every compare.py table in text (its printed output, or RESULTS.md) as
    {"meta": {...}, "rows": [...]}, in order."""
    tables, meta, rows = [], {}, None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("# command:"):
            meta = {**meta, "command": line.split(":", 1)[1].strip()}
        elif line.startswith("# gsb session:"):
            meta = {**meta, "session": line.split(":", 1)[1].strip()}
        elif re.match(r"# \d{4}-\d\d-\d\d\s", line):
            parts = line[2:].split()
            meta = {"date": parts[0], "host": parts[1],
                    "cores": int(parts[2]) if parts[2].isdigit() else None}
        elif line.startswith("| case | dtype | sklearn fit ms"):
            rows = []
            tables.append({"meta": meta, "rows": rows})
        elif rows is not None and line.startswith("|") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if len(cells) == len(COLUMNS):
                rows.append(_row(cells))
        elif rows is not None and not line.startswith("|---"):
            rows, meta = None, {}  # the table ended; the next one brings its own header
    return [t for t in tables if t["rows"]]


def load(path, match=None):
    """The results in path (compare.py's JSON, or text holding its tables): the last
    table, or the first whose command matches the regular expression match."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        tables = [json.loads(text)]
    except ValueError:
        tables = parse_tables(text)
    if match:
        tables = [t for t in tables if re.search(match, t["meta"].get("command", ""))]
    if not tables:
        raise SystemExit(f"plot.py: no compare.py table in {path}"
                         + (f" whose command matches {match!r}" if match else ""))
    return tables[0] if match else tables[-1]


def device_of(meta):
    m = re.search(r"--session[ =](\S+)", meta.get("command", ""))
    session = meta.get("session") or (m.group(1) if m else "local?device=cpu")
    m = re.search(r"device=(\w+)", session)
    device = m.group(1) if m else ("remote" if "://" in session else "cpu")
    return {"cuda": "GPU", "cpu": "CPU"}.get(device, device)


def suite_of(meta):
    m = re.search(r"--suite[ =](\w+)", meta.get("command", ""))
    return meta.get("suite") or (m.group(1) if m else "cpu")


# ---- drawing ---------------------------------------------------------------------------

def draw(table, out, device=None, title=None):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    meta = table["meta"]
    # a ratio needs scikit-learn's time: cases with an absolute target alone are left out
    rows = [r for r in table["rows"] if r["fit_ratio"] is not None]
    device = device or device_of(meta)
    dtypes = sorted({r["dtype"] for r in rows})
    labels = [r["case"] + (f"  ({r['dtype'].replace('float', 'f')})" if len(dtypes) > 1
                           else "") for r in rows]
    n = len(rows)
    fig, ax = plt.subplots(figsize=(9.5, 1.6 + 0.36 * n))
    ys = list(range(n))[::-1]  # first case at the top
    h = 0.38
    ratios = [r["fit_ratio"] for r in rows] + [r["pred_ratio"] for r in rows
                                               if r["pred_ratio"] is not None]
    ax.barh([y + h / 2 for y in ys], [r["fit_ratio"] for r in rows], h, color="#3b75af",
            label="fit")
    ax.barh([y - h / 2 for y in ys], [r["pred_ratio"] or 0 for r in rows], h,
            color="#ef8636", label="predict / transform")
    ax.set_xscale("log")
    goals = [r["target"] for r in rows if isinstance(r["target"], (int, float))]
    lo = min(ratios + goals + [1.0]) / 1.6
    hi = max(ratios + goals + [1.0]) * 2.2
    ax.set_xlim(lo, hi)
    for y, r in zip(ys, rows):
        for value, dy in ((r["fit_ratio"], h / 2), (r["pred_ratio"], -h / 2)):
            if value is None:
                continue
            ax.text(value * 1.04, y + dy, f"{value:.2f}x" if value < 10 else f"{value:.0f}x",
                    va="center", fontsize=7)
    ax.axvline(1.0, color="#555555", lw=1, zorder=0, label="1x: the same time")
    if goals and len(set(goals)) == 1 and len(goals) == n:
        ax.axvline(goals[0], color="#c0392b", lw=1.4, ls="--",
                   label=f"goal: ratio >= {goals[0]:g}x")
    else:
        for y, r in zip(ys, rows):
            if isinstance(r["target"], (int, float)):
                ax.plot([r["target"]] * 2, [y - 0.48, y + 0.48], color="#c0392b", lw=2)
        if goals:
            ax.plot([], [], color="#c0392b", lw=2, label="goal of the case")
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=8)
    for tick, r in zip(ax.get_yticklabels(), rows):
        if r["target_met"] is False:
            tick.set_color("#c0392b")
    ticks = [t for t in (0.1, 0.3, 1, 3, 10, 30, 100, 300, 1000) if lo <= t <= hi]
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t:g}x" for t in ticks])
    ax.set_xlabel("scikit-learn time / gsb time  (right of 1x: gsb is faster; log scale)")
    where = ", ".join(str(v) for v in (
        f"{meta['cores']} cores" if meta.get("cores") else None, meta.get("date")) if v)
    ax.set_title(title or f"gsb against scikit-learn: {device}, {suite_of(meta)} suite"
                 + (f" ({where})" if where else ""), fontsize=10, pad=24)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=4, fontsize=8,
              frameon=False)
    ax.grid(axis="x", which="major", color="#dddddd", lw=0.6, zorder=0)
    ax.set_axisbelow(True)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def default_output(table, device=None):
    """bench/ratios-gpu.png (the gpu suite on a GPU), ratios-cpu.png (the cpu suite on
    the CPU backend), else ratios-SUITE-DEVICE.png (ratios-small-cpu.png ...)."""
    here = os.path.dirname(os.path.abspath(__file__))
    device = (device or device_of(table["meta"])).lower()
    suite = suite_of(table["meta"])
    name = f"ratios-{suite}.png" if suite == device else f"ratios-{suite}-{device}.png"
    return os.path.join(here, name)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", help="compare.py --json output, or text holding its tables")
    ap.add_argument("--match", help="the first table whose command matches this regex "
                                    "(default: the last table)")
    ap.add_argument("--device", help="the device label (default: from the gsb session)")
    ap.add_argument("--title")
    ap.add_argument("-o", "--output", help="PNG path (default bench/ratios-SUITE[-DEVICE].png)")
    args = ap.parse_args(argv)
    table = load(args.results, args.match)
    out = args.output or default_output(table, args.device)
    draw(table, out, args.device, args.title)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
