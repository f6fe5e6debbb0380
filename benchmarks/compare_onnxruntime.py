#!/usr/bin/env python3
"""Compares kiln's outputs for an ONNX model with onnxruntime's (CPU execution provider).

    python3 benchmarks/compare_onnxruntime.py MODEL.onnx --inputs DIR --kiln-outputs DIR
                                              [--max-rel 2e-2] [--min-cosine 0.999]

DIR of --inputs holds one NAME.npy per model input (what `kiln_make_model --inputs`
writes); --kiln-outputs holds what `kiln run MODEL.kiln --input NAME=DIR/NAME.npy ...
--output-dir DIR` wrote (one .npy per output, named as kiln run names them). For each
output it prints the max |kiln - ort| over the range of ort's output (max - min) and
the cosine similarity of the two, and exits 1 when an output is beyond --max-rel or
below --min-cosine (the defaults are the tolerances docs/gpu.md gives for fp16
bundles: fp16 storage keeps 11 significant bits per stored value, so errors of a few
1e-3 of the range accumulate over a deep model).
"""
import argparse
import os
import re
import sys

import numpy as np


def kiln_file_name(name):
    # tools/run_command.cc FileNameFor: anything but [A-Za-z0-9_.-] becomes '_'.
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", name) + ".npy"


def compare(prefix, got, want, max_rel, min_cosine):
    """Prints max |got - want| over want's range and the cosine after `prefix`; whether
    the shapes agree and both are within tolerance."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        print(f"{prefix}: shape {got.shape} from kiln, {want.shape} from onnxruntime")
        return False
    rng = float(want.max() - want.min()) if want.size else 0.0
    rng = rng if rng > 0 else max(float(np.abs(want).max(initial=0.0)), 1.0)
    rel = float(np.abs(got - want).max(initial=0.0)) / rng
    den = float(np.linalg.norm(got) * np.linalg.norm(want))
    cos = float(np.dot(got.ravel(), want.ravel()) / den) if den > 0 else 1.0
    good = bool(rel <= max_rel and cos >= min_cosine and np.isfinite(got).all())
    print(f"{prefix} {list(want.shape)}: max|kiln-ort|/range {rel:.3e}, cosine {cos:.6f} "
          f"{'ok' if good else 'BEYOND TOLERANCE'}", flush=True)
    return good


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--inputs", required=True)
    ap.add_argument("--kiln-outputs", required=True)
    ap.add_argument("--max-rel", type=float, default=2e-2)
    ap.add_argument("--min-cosine", type=float, default=0.999)
    args = ap.parse_args()

    import onnxruntime as ort  # the GPU machine has it (CPU execution provider)

    sess = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"])
    feeds = {}
    for i in sess.get_inputs():
        path = os.path.join(args.inputs, i.name + ".npy")
        if not os.path.exists(path):
            sys.exit(f"compare_onnxruntime: no input file {path} for input '{i.name}'")
        feeds[i.name] = np.load(path)
    names = [o.name for o in sess.get_outputs()]
    outs = sess.run(names, feeds)
    ok = True
    model = os.path.basename(args.model)
    for name, want in zip(names, outs):
        path = os.path.join(args.kiln_outputs, kiln_file_name(name))
        if not os.path.exists(path):
            print(f"{model}: {name}: kiln wrote no {path}")
            ok = False
            continue
        ok = compare(f"{model}: {name}", np.load(path), want, args.max_rel, args.min_cosine) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
