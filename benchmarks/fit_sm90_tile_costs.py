#!/usr/bin/env python3
"""Fits the sm90 tile cost model (codegen/ops/gemm_sm90.cc, Sm90TileCosts) to a sweep.

Each sweep CSV holds kiln_gemm_bench rows (--idioms gemm,bias_relu,bias_gelu) with two
leading columns: `session` and `forced_config` (the --sm90-config of the run, or a note
for heuristic runs). For every config in CONFIGS and every idiom it takes the rows of
the first session (of the first file) that forced it over the squares, transformer and
random sets and fits

    time_us = fixed + waves * (per_wave + per_wave_k * K),  waves = ceil(tiles / SMs)

by least squares on the relative error: one fit per epilogue class (EpilogueWork:
gemm is kNone, bias_relu kLight, bias_gelu kSpecial). It prints the C++ table rows,
each fit's mean/max error, and a leave-one-out check of the picks per idiom against
the fastest peer and against the best config of each shape.

    benchmarks/fit_sm90_tile_costs.py benchmarks/results/gemm_sm90_tile_sweep_h100_2026-11-27.csv.gz

Sm90TileCosts holds the two 64-row ping-pong rows of that fit and the other ten from
benchmarks/results/gemm_sm90_epilogue_tile_sweep_h100_2026-11-23e.csv.gz (which has no
64-row ping-pong rows; configs a sweep lacks are left out): the 2026-11-27 refit of all
twelve, one round, moved some established picks that ran slower in an A/B run
(benchmarks/results/gemm_sm90_full_refit_ab_h100_2026-11-27.csv.gz). Earlier tables
fitted gemm alone.
"""
import csv
import gzip
import math
import sys

CONFIGS = ["128x256 c2x1 s4", "128x192 c2x1 s5", "128x128 c2x1 s5", "64x256 c1x1 s5",
           "64x192 c1x1 s6", "64x128 c1x1 s8", "64x64 c1x1 s8", "192x192 c3x1 s4", "192x128 c3x1 s5",
           "128x128 p2x2 s5", "64x64 p2x1 s12", "64x128 p2x1 s8"]
# The 2026-11-23e sweep also forced 64x256 p2x1 s5: its fits were the worst and the
# shapes it was picked for ran slower than before. The 2026-11-27 sweep also forced
# 64x192 p2x1 s6 (a worse fit still, and slower where a table with it picked it, at
# 640x2176x3200).
IDIOMS = ("gemm", "bias_relu", "bias_gelu")  # EpilogueWork kNone, kLight, kSpecial
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


def initializer(config):
    """The C++ Sm90GemmConfig of "BMxBN cCxW sS" / "... pCxW sS"."""
    bm, bn = tile(config)
    mode, stages = config.split()[1], config.split()[2][1:]
    consumers, wg_m = mode[1:].split("x")
    return f"{{{bm}, {bn}, {consumers}, {wg_m}, {stages}{', true' if mode[0] == 'p' else ''}}}"


def main(paths):
    times = {}  # (idiom, config) -> {shape: us}
    peers = {}  # (idiom, shape) -> fastest peer us
    first_session = {}
    def lines(p):  # the committed sweeps are gzipped (benchmarks/RESULTS.md says why)
        return gzip.open(p, "rt") if p.endswith(".gz") else open(p)

    for path, r in ((p, r) for p in paths for r in csv.DictReader(l for l in lines(p) if not l.startswith("#"))):
        if r["status"] != "OK" or r["idiom"] not in IDIOMS or r["set"] not in SETS:
            continue
        shape = (int(r["m"]), int(r["n"]), int(r["k"]))
        key = (r["idiom"], shape)
        peers[key] = min(peers.get(key, math.inf), float(r["best_peer_ms"]) * 1000)
        c = r["forced_config"]
        if c not in CONFIGS:
            continue
        session = first_session.setdefault(c, (path, r["session"]))
        if (path, r["session"]) == session:
            times.setdefault((r["idiom"], c), {})[shape] = float(r["kiln_ms"]) * 1000
    configs = [c for c in CONFIGS if all((i, c) in times for i in IDIOMS)]
    if len(configs) < 2:
        sys.exit(f"sweep rows for {len(configs)} of the configs {CONFIGS}")
    for c in CONFIGS:
        if c not in configs:
            print(f"// {c}: not in the sweep, left out", file=sys.stderr)
    shapes = sorted(set.intersection(*(set(t) for t in times.values())))

    def fit(idiom, exclude=None):
        return {c: solve([(features(c, s), times[(idiom, c)][s]) for s in shapes if s != exclude]) for c in configs}

    def predict(co, c, s):
        return sum(a * b for a, b in zip(co, features(c, s)))

    coef = {i: fit(i) for i in IDIOMS}
    for c in configs:
        fits, notes = [], []
        for i in IDIOMS:
            co = coef[i][c]
            errs = [abs(predict(co, c, s) / times[(i, c)][s] - 1) for s in shapes]
            fits.append(f"{{{co[0]:.4g}, {co[1]:.4g}, {co[2]:.4g}}}")
            notes.append(f"{sum(errs) / len(errs):.3f}/{max(errs):.3f}")
        print(f"{{{initializer(c)}, {{{', '.join(fits)}}}}},  // {c}: mean/max error {', '.join(notes)}")
    gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
    for i in IDIOMS:
        ratios, picked = [], []
        for s in shapes:  # leave-one-out: the pick for s from a fit without s
            co = fit(i, exclude=s)
            pick = min(configs, key=lambda c: predict(co[c], c, s))
            ratios.append(peers[(i, s)] / times[(i, pick)][s])
            picked.append(min(times[(i, c)][s] for c in configs) / times[(i, pick)][s])
        best = [peers[(i, s)] / min(times[(i, c)][s] for c in configs) for s in shapes]
        print(f"{i}: {len(shapes)} shapes: leave-one-out picks {gm(ratios):.3f} of the fastest peer (geomean), "
              f"best config per shape {gm(best):.3f}; picks at {gm(picked):.3f} of the best config")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
