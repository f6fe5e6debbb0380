#!/usr/bin/env python3
"""Fits the sm90 tile cost model (codegen/ops/gemm_sm90.cc, Sm90TileCosts) to a sweep.

Each sweep CSV holds kiln_gemm_bench rows (--idioms gemm) with two leading columns:
`session` and `forced_config` (the --sm90-config of the run, or a note for heuristic
runs). For every config in CONFIGS it takes the rows of the first session (of the
first file) that forced it over the squares, transformer and random sets and fits

    time_us = fixed + waves * (per_wave + per_wave_k * K),  waves = ceil(tiles / SMs)

by least squares on the relative error. It prints the C++ table rows, each config's
mean/max error, and a leave-one-out check of the picks against the fastest peer.

    benchmarks/fit_sm90_tile_costs.py benchmarks/results/gemm_sm90_tile_sweep_h100_2026-11-23b.csv

(the table in Sm90TileCosts; the earlier fits took the 2026-11-22 g and i sweeps,
whose files hold seven of these configs). Since RESULTS.md 2026-11-23 (d) the table
runs 128x192 with 5 stages and the heuristic gives unsplit 64x64 tiles 12 at K >= 1024,
on the parameters fitted here for 4 and 8: a refit should sweep those forms.
"""
import csv
import math
import sys

CONFIGS = ["128x256 c2x1 s4", "128x192 c2x1 s4", "128x128 c2x1 s5", "64x256 c1x1 s5",
           "64x192 c1x1 s6", "64x128 c1x1 s8", "64x64 c1x1 s8", "192x192 c3x1 s4", "192x128 c3x1 s5"]
SETS = ("squares", "transformer", "random")
SMS = 132


def tile(config):
    bm, bn = config.split()[0].split("x")
    return int(bm), int(bn)


def features(config, shape):
    bm, bn = tile(config)
    m, n, k = shape
    waves = -(-(-(-m // bm) * -(-n // bn)) // SMS)
    return [1.0, float(waves), float(waves * k)]


def solve(rows):
    """Weighted least squares (weights 1/y^2) by the normal equations."""
    n = 3
    a = [[0.0] * (n + 1) for _ in range(n)]
    for x, y in rows:
        w = 1.0 / (y * y)
        for i in range(n):
            a[i][n] += w * x[i] * y
            for j in range(n):
                a[i][j] += w * x[i] * x[j]
    for i in range(n):
        p = max(range(i, n), key=lambda r: abs(a[r][i]))
        a[i], a[p] = a[p], a[i]
        for r in range(n):
            if r != i:
                f = a[r][i] / a[i][i]
                a[r] = [v - f * u for v, u in zip(a[r], a[i])]
    return [a[i][n] / a[i][i] for i in range(n)]


def main(paths):
    times = {}  # config -> {shape: us}
    peers = {}  # shape -> fastest peer us
    first_session = {}
    for path, r in ((p, r) for p in paths for r in csv.DictReader(open(p))):
        if r["status"] != "OK" or r["idiom"] != "gemm" or r["set"] not in SETS:
            continue
        shape = (int(r["m"]), int(r["n"]), int(r["k"]))
        peers[shape] = min(peers.get(shape, math.inf), float(r["best_peer_ms"]) * 1000)
        c = r["forced_config"]
        if c not in CONFIGS:
            continue
        session = first_session.setdefault(c, (path, r["session"]))
        if (path, r["session"]) == session:
            times.setdefault(c, {})[shape] = float(r["kiln_ms"]) * 1000
    missing = [c for c in CONFIGS if c not in times]
    if missing:
        sys.exit(f"no sweep rows for {missing}")
    shapes = sorted(set.intersection(*(set(t) for t in times.values())))

    def fit(exclude=None):
        return {c: solve([(features(c, s), times[c][s]) for s in shapes if s != exclude]) for c in CONFIGS}

    coef = fit()
    for c in CONFIGS:
        errs = [abs(sum(a * b for a, b in zip(coef[c], features(c, s))) / times[c][s] - 1) for s in shapes]
        bm, bn = tile(c)
        print(f"{{{{{bm}, {bn}, ...}}, {coef[c][0]:.4g}, {coef[c][1]:.4g}, {coef[c][2]:.4g}}},  // {c}: "
              f"mean error {sum(errs) / len(errs):.3f}, max {max(errs):.3f}")
    ratios = []
    for s in shapes:  # leave-one-out: the pick for s from a fit without s
        co = fit(exclude=s)
        pick = min(CONFIGS, key=lambda c: sum(a * b for a, b in zip(co[c], features(c, s))))
        ratios.append(peers[s] / times[pick][s])
    best = [peers[s] / min(times[c][s] for c in CONFIGS) for s in shapes]
    gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
    print(f"{len(shapes)} shapes: leave-one-out picks {gm(ratios):.3f} of the fastest peer (geomean), "
          f"best config per shape {gm(best):.3f}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
