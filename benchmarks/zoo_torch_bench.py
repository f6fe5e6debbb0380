#!/usr/bin/env python3
"""PyTorch's time for the zoo's architectures at full size: the same torchvision /
transformers modules that `export_zoo.py --full` exports, in fp16 on the GPU, eager and
torch.compile(mode="reduce-overhead"), timed as `kiln bench` times (device time per run
between CUDA events, median over --iters runs after --warmup). Pair it with
`kiln bench` on the exported files, in the same device call (benchmarks/RESULTS.md,
"Zoo models at full size", gives the commands).

    python3 benchmarks/zoo_torch_bench.py --export-zoo ../shared/zoo/export_zoo.py \\
        --models efficientnet:1,efficientnet:32 --csv torch.csv

The modules come from export_zoo.py's own table (its zoo(full=True)), so the timed
module is the exported one; inputs are its make_inputs(batch, seq).
"""

import argparse
import csv
import importlib.util
import statistics
import sys
import time
import traceback

import torch

FIELDS = ["model", "batch", "mode", "median_ms", "min_ms", "compile_s", "torch_version", "gpu", "status"]


def load_export_zoo(path):
    spec = importlib.util.spec_from_file_location("export_zoo", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def time_runs(fn, warmup, iters):
    """Device time of each of `iters` back-to-back runs (ms), after `warmup` runs."""
    for _ in range(warmup):
        fn()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
    torch.cuda.synchronize()
    events[0].record()
    for i in range(iters):
        fn()
        events[i + 1].record()
    torch.cuda.synchronize()
    return [events[i].elapsed_time(events[i + 1]) for i in range(iters)]


def bench(name, batch, seq, mode, table, args):
    build, make_inputs, _, _ = table[name]
    torch.manual_seed(0)
    module = build().eval().cuda().half()
    inputs = [t.cuda() for t in make_inputs(batch, seq)]
    inputs = [t.half() if t.is_floating_point() else t for t in inputs]
    compile_s = 0.0
    with torch.inference_mode():
        fn = module
        if mode == "compile":
            fn = torch.compile(module, mode="reduce-overhead")
            start = time.perf_counter()
            fn(*inputs)
            torch.cuda.synchronize()
            compile_s = time.perf_counter() - start
        times = time_runs(lambda: fn(*inputs), args.warmup, args.iters)
    return statistics.median(times), min(times), compile_s


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--export-zoo", required=True, help="path of export_zoo.py (../shared/zoo/export_zoo.py)")
    p.add_argument("--models", required=True, help="comma-separated NAME:BATCH (NAME as in export_zoo.py)")
    p.add_argument("--seq", type=int, default=128, help="tokens per sequence for text models (default 128)")
    p.add_argument("--modes", default="eager,compile")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--csv", help="write the rows here")
    args = p.parse_args()
    table = load_export_zoo(args.export_zoo).zoo(full=True)
    gpu = torch.cuda.get_device_name()
    rows = []
    for item in args.models.split(","):
        name, batch = item.split(":")
        for mode in args.modes.split(","):
            row = {"model": name, "batch": int(batch), "mode": mode, "torch_version": torch.__version__, "gpu": gpu}
            try:
                median, low, compile_s = bench(name, int(batch), args.seq, mode, table, args)
                row.update(median_ms=f"{median:.4f}", min_ms=f"{low:.4f}", compile_s=f"{compile_s:.1f}", status="ok")
            except Exception as e:  # a model that fails is a row that says so
                traceback.print_exc()
                row.update(median_ms="", min_ms="", compile_s="", status=f"error: {type(e).__name__}: {e}"[:200])
            rows.append(row)
            print(f"{name} batch {batch} {mode}: {row['median_ms'] or row['status']} ms", flush=True)
            torch._dynamo.reset()
            torch.cuda.empty_cache()
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=FIELDS)
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
