"""Runs an ONNX model with kiln from torch tensors to torch tensors (DLPack, no host
copy) and checks it against onnxruntime on the same inputs.

    python3 python/examples/torch_dlpack.py MODEL.onnx [--input NAME=FILE.pb|npy]... [--iterations N]

Inputs default to the model's test_data_set_0/input_K.pb beside it (the zoo's layout).
Needs torch with CUDA, onnx and onnxruntime; kiln from this checkout (PYTHONPATH=python).
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort
import torch

import kiln


def read_inputs(model_path, specs):
    if specs:
        out = {}
        for spec in specs:
            name, path = spec.split("=", 1)
            if path.endswith(".npy"):
                out[name] = np.load(path)
            else:
                t = onnx.TensorProto()
                t.ParseFromString(Path(path).read_bytes())
                out[name] = onnx.numpy_helper.to_array(t)
        return out
    out, k = {}, 0
    data = Path(model_path).parent / "test_data_set_0"
    while (data / f"input_{k}.pb").exists():
        t = onnx.TensorProto()
        t.ParseFromString((data / f"input_{k}.pb").read_bytes())
        out[t.name] = onnx.numpy_helper.to_array(t)
        k += 1
    if not out:
        sys.exit(f"no inputs: give --input NAME=FILE, or put test_data_set_0/input_K.pb beside {model_path}")
    return out


def median_ms(fn, iterations):
    times = []
    for _ in range(iterations):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("--input", action="append", default=[])
    parser.add_argument("--precision", default="fp16")
    parser.add_argument("--iterations", type=int, default=20)
    args = parser.parse_args()

    inputs = read_inputs(args.model, args.input)
    start = time.perf_counter()
    model = kiln.compile(args.model, precision=args.precision, input_shape={n: a.shape for n, a in inputs.items()})
    print(f"compiled {args.model} for {model.arch} ({model.precision}) in {time.perf_counter() - start:.1f} s")
    session = model.session(device="gpu")

    torch_in = {n: torch.from_numpy(a.copy()).cuda() for n, a in inputs.items()}
    torch_out = session.run(torch_in)  # torch tensors on the GPU, written by kiln in place
    ort_session = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"])
    reference = ort_session.run(None, inputs)
    names = [o.name for o in ort_session.get_outputs()]
    worst = 0.0
    for name, want in zip(names, reference):
        got = torch_out[name]
        assert isinstance(got, torch.Tensor) and got.is_cuda
        g, w = got.double().cpu().numpy().ravel(), np.asarray(want, np.float64).ravel()
        rel = float(np.max(np.abs(g - w)) / max(np.max(np.abs(w)), 1e-30))
        cosine = float(g @ w / np.sqrt((g @ g) * (w @ w)))
        worst = max(worst, rel)
        print(f"  {name}: torch.{str(got.dtype).split('.')[-1]}{list(got.shape)} on {got.device}; "
              f"vs onnxruntime max rel diff {rel:.2e}, cosine {cosine:.6f}")
    ms = median_ms(lambda: session.run(torch_in, outputs=torch_out), args.iterations)
    print(f"  kiln run, torch tensors in and out: median {ms:.3f} ms over {args.iterations} calls")
    return 0 if worst <= 2e-2 else 1


if __name__ == "__main__":
    sys.exit(main())
