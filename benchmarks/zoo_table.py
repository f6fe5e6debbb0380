#!/usr/bin/env python3
"""Issue 33's zoo table from the CSVs that run_zoo_benchmarks.sh leaves in one folder:
kiln_NAME_BATCH.csv (`kiln bench --compare fused,unfused --csv`) and torch_NAME_BATCH.csv
(zoo_torch_bench.py --csv). Prints one markdown row per (model, batch) with kiln fused,
kiln unfused, PyTorch eager and torch.compile (median ms), torch.compile over kiln fused,
the geometric mean of that column, and the rows short of the issue's bar (fused at least
1.2x torch.compile and no slower than unfused).

    python3 benchmarks/zoo_table.py /tmp/zoo-bench [--csv merged.csv]
"""

import argparse
import csv
import glob
import math
import os
import re
import sys

NAME = re.compile(r"^(kiln|torch)_(.+)_(\d+)\.csv$")
COLUMNS = ["kiln fused", "kiln unfused", "torch eager", "torch.compile"]


def read_rows(folder):
    """{(model, batch): {column: median ms}}, from every kiln_*.csv and torch_*.csv."""
    table = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.csv"))):
        m = NAME.match(os.path.basename(path))
        if not m:
            continue
        kind, model, batch = m.group(1), m.group(2), int(m.group(3))
        cells = table.setdefault((model, batch), {})
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if kind == "kiln":
                    column = {"fused": "kiln fused", "unfused": "kiln unfused"}.get(row.get("config", ""))
                else:
                    column = {"eager": "torch eager", "compile": "torch.compile"}.get(row.get("mode", ""))
                    if row.get("status", "ok") != "ok":
                        continue
                if column and row.get("median_ms"):
                    cells[column] = float(row["median_ms"])
    return table


def ratio(cells):
    if "kiln fused" in cells and "torch.compile" in cells and cells["kiln fused"] > 0:
        return cells["torch.compile"] / cells["kiln fused"]
    return None


def render(table):
    """The markdown table, its geometric mean line and the rows below the bar."""
    lines = ["| model | batch | " + " | ".join(COLUMNS) + " | compile / fused |",
             "|---|---:|" + "---:|" * (len(COLUMNS) + 1)]
    ratios, short = [], []
    for (model, batch), cells in sorted(table.items()):
        r = ratio(cells)
        values = [f"{cells[c]:.3f}" if c in cells else "-" for c in COLUMNS]
        last = f"{r:.2f}" if r else "-"
        lines.append(f"| {model} | {batch} | " + " | ".join(values) + f" | {last} |")
        if r:
            ratios.append(r)
            if r < 1.2:
                short.append(f"{model} at {batch}: {r:.2f}x torch.compile (< 1.2)")
        if "kiln fused" in cells and "kiln unfused" in cells and cells["kiln fused"] > cells["kiln unfused"]:
            short.append(f"{model} at {batch}: fused {cells['kiln fused']:.3f} ms slower than unfused "
                         f"{cells['kiln unfused']:.3f} ms")
    if ratios:
        geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        lines.append("")
        lines.append(f"Geometric mean of the last column over {len(ratios)} rows: {geomean:.2f}")
    if short:
        lines.append("")
        lines.append("Short of the bar: " + "; ".join(short) + ".")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", help="where run_zoo_benchmarks.sh wrote kiln_*.csv and torch_*.csv")
    p.add_argument("--csv", help="also write the merged rows here")
    args = p.parse_args(argv)
    table = read_rows(args.folder)
    if not table:
        print(f"zoo_table.py: no kiln_NAME_BATCH.csv or torch_NAME_BATCH.csv in {args.folder}", file=sys.stderr)
        return 1
    print(render(table))
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["model", "batch"] + COLUMNS + ["compile_over_fused"])
            for (model, batch), cells in sorted(table.items()):
                r = ratio(cells)
                w.writerow([model, batch] + [cells.get(c, "") for c in COLUMNS] + [f"{r:.4f}" if r else ""])
    return 0


if __name__ == "__main__":
    sys.exit(main())
