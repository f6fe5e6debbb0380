#!/usr/bin/env python3
"""Checks one dynamic bundle against onnxruntime (CPU, fp32) at several run sizes.

    python3 benchmarks/compare_onnxruntime_sizes.py MODEL.onnx BUNDLE.kiln \\
        --size batch=1,seq=128 --size batch=8,seq=128 ... [--kiln "RUN build/tools/kiln"]
        [--max-rel 2e-2] [--min-cosine 0.999] [--work DIR]

BUNDLE.kiln is MODEL.onnx compiled once with ranges (`kiln compile MODEL.onnx --dim
batch=1..32 --dim seq=1..512 -o BUNDLE.kiln`). For each --size the script makes inputs
of those sizes from the model's signature (dim_param names take the --size values):
token ids uniform in [0, 1000), attention masks of ones with the later rows' tails
masked out (row b hides its last b x 10% positions, as padded batches do), token type
ids of zeros, floats N(0, 1); runs `kiln run BUNDLE --dim ... --input NAME=FILE.npy
--output-dir DIR` (on the GPU where there is one) and onnxruntime on the same inputs,
and prints per output max |kiln - ort| over the range of ort's output and the
cosine, as compare_onnxruntime.py does for static bundles. Exits 1 when an output is beyond
--max-rel or below --min-cosine (the defaults: docs/gpu.md's fp16 tolerances).
--kiln is the command that runs kiln (default build/tools/kiln; a staged build's
`.stage/run build/tools/kiln` on the GPU machine).
"""
import argparse
import os
import shlex
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_onnxruntime import compare, kiln_file_name  # noqa: E402


def make_input(name, dtype, dims, rng):
    if np.issubdtype(dtype, np.integer):
        lname = name.lower()
        if "mask" in lname:
            x = np.ones(dims, dtype=dtype)
            if len(dims) == 2:
                for b in range(1, dims[0]):
                    hidden = min(dims[1] - 1, dims[1] * b // 10)
                    if hidden > 0:
                        x[b, dims[1] - hidden:] = 0
            return x
        if "type" in lname:
            return np.zeros(dims, dtype=dtype)
        return rng.integers(0, 1000, size=dims).astype(dtype)
    return rng.standard_normal(dims).astype(dtype)


def parse_size(text):
    size = {}
    for part in text.split(","):
        key, _, value = part.partition("=")
        if not value:
            raise SystemExit(f"--size {text}: expected NAME=N[,NAME=N...]")
        size[key.strip()] = int(value)
    return size


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("bundle")
    ap.add_argument("--size", action="append", required=True, type=parse_size)
    ap.add_argument("--kiln", default="build/tools/kiln")
    ap.add_argument("--max-rel", type=float, default=2e-2)
    ap.add_argument("--min-cosine", type=float, default=0.999)
    ap.add_argument("--work", default=None)
    args = ap.parse_args()

    import onnxruntime as ort  # the GPU machine has it (CPU execution provider)

    sess = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"])
    type_of = {"tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(float)": np.float32,
               "tensor(float16)": np.float16, "tensor(bool)": np.bool_}
    work = args.work or tempfile.mkdtemp(prefix="kiln-sizes-")
    rng = np.random.default_rng(0)
    ok = True
    for size in args.size:
        label = "x".join(str(v) for v in size.values())
        feeds, files = {}, []
        for inp in sess.get_inputs():
            dims = []
            for d in inp.shape:
                if isinstance(d, int):
                    dims.append(d)
                elif d in size:
                    dims.append(size[d])
                else:
                    raise SystemExit(f"input {inp.name}: dim '{d}' has no --size value (given: {sorted(size)})")
            x = make_input(inp.name, type_of[inp.type], dims, rng)
            path = os.path.join(work, f"{label}_{kiln_file_name(inp.name)}")
            np.save(path, x)
            feeds[inp.name] = x
            files += ["--input", f"{inp.name}={path}"]
        out_dir = os.path.join(work, f"out_{label}")
        cmd = shlex.split(args.kiln) + ["run", args.bundle, "--output-dir", out_dir] + files
        for key, value in size.items():
            cmd += ["--dim", f"{key}={value}"]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            print(f"{label}: kiln run failed ({run.returncode}): {run.stderr.strip()[-400:]}")
            ok = False
            continue
        refs = sess.run(None, feeds)
        for meta, ref in zip(sess.get_outputs(), refs):
            got = np.load(os.path.join(out_dir, kiln_file_name(meta.name)))
            ok = compare(f"{label} {meta.name}", got, ref, args.max_rel, args.min_cosine) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
