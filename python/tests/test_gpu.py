"""The Python package on the GPU with torch: torch tensors in, torch tensors out through
DLPack, equal to the numpy path and to onnxruntime's outputs; kiln-owned GPU tensors;
a caller's stream. Skips without a GPU or without torch's CUDA. Runs under pytest, or as
a script (python3 test_gpu.py, which finds this checkout's package and calls pytest)."""

import sys
from pathlib import Path

if __name__ == "__main__":  # as a script: this checkout's package, as conftest.py gives pytest
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import pytest

import kiln
from conftest import zoo_case
from zoo_data import MAX_REL, MIN_COSINE, compare, read_set


def _torch():
    if not kiln.gpu_available():
        pytest.skip("no CUDA GPU")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    return torch


def _compiled(case, tmp_path, precision="fp16"):
    case_dir = zoo_case(case)
    inputs = read_set(case_dir, "input_")
    model = kiln.compile(case_dir / "model.onnx", tmp_path / f"{case}.kiln", precision=precision,
                         input_shape={n: a.shape for n, a in inputs.items()})
    return model, inputs, read_set(case_dir, "output_")


@pytest.mark.parametrize("case", ["bert.legacy", "mobilenet_v3.legacy"])
def test_torch_in_torch_out_without_host_copies(case, tmp_path):
    torch = _torch()
    model, inputs, expected = _compiled(case, tmp_path)
    session = model.session(device="gpu")
    assert session.stream
    numpy_out = session.run(inputs)
    torch_in = {n: torch.from_numpy(a).cuda() for n, a in inputs.items()}
    torch_out = session.run(torch_in)
    for name, want in expected.items():
        t = torch_out[name]
        assert isinstance(t, torch.Tensor) and t.is_cuda and tuple(t.shape) == want.shape
        got = t.cpu().numpy()
        np.testing.assert_array_equal(got, numpy_out[name])  # same bundle, same kernels
        rel, cosine = compare(got, want)
        print(f"{case} {name}: torch->torch vs onnxruntime max rel diff {rel:.2e}, cosine {cosine:.6f}")
        assert rel <= MAX_REL["fp16"] and cosine >= MIN_COSINE
    # Caller-given torch output buffers are written in place.
    buffers = {o.name: torch.full(o.shape, float("nan"), device="cuda", dtype=getattr(torch, o.dtype))
               for o in model.outputs}
    assert session.run(torch_in, outputs=buffers) is buffers
    for name in buffers:
        assert torch.equal(buffers[name], torch_out[name])
    # GPU inputs and host outputs are two kinds of memory in one call.
    with pytest.raises(kiln.InvalidArgumentError, match="is not in GPU memory"):
        session.run(torch_in, outputs={o.name: np.empty(o.shape, np.float32) for o in model.outputs})
    if len(model.inputs) > 1:
        with pytest.raises(kiln.InvalidArgumentError, match="in GPU memory, the others in host memory"):
            session.run({**torch_in, model.inputs[0].name: inputs[model.inputs[0].name]})


def test_kiln_gpu_tensors_go_to_torch_through_dlpack(tmp_path):
    torch = _torch()
    model, inputs, expected = _compiled("mobilenet_v3.legacy", tmp_path)
    session = model.session(device="gpu", cuda_graph=False)
    gpu_in = {n: kiln.GpuTensor.from_numpy(a) for n, a in inputs.items()}
    out = session.run(gpu_in)
    name = model.outputs[0].name
    assert isinstance(out[name], kiln.GpuTensor)
    host = out[name].numpy()
    t = torch.from_dlpack(out[name])  # takes the memory over
    assert t.is_cuda and torch.equal(t.cpu(), torch.from_numpy(host))
    with pytest.raises(kiln.InvalidArgumentError, match="handed over"):
        out[name].numpy()
    rel, cosine = compare(host, expected[name])
    assert rel <= MAX_REL["fp16"] and cosine >= MIN_COSINE
    del t  # torch calls the deleter, which frees kiln's buffer
    unclaimed = kiln.GpuTensor((4, 4), "float32").__dlpack__()
    del unclaimed  # a capsule nobody took frees its memory too


def test_session_on_torchs_stream(tmp_path):
    torch = _torch()
    model, inputs, _ = _compiled("bert.legacy", tmp_path)
    stream = torch.cuda.Stream()
    session = model.session(device="gpu", stream=stream)
    assert session.stream == stream.cuda_stream
    with torch.cuda.stream(stream):
        torch_in = {n: torch.from_numpy(a).cuda() for n, a in inputs.items()}
        out = session.run(torch_in)
    want = model.session(device="cpu").run(inputs)
    for name in want:
        rel, cosine = compare(out[name].cpu().numpy(), want[name])
        assert rel <= MAX_REL["fp16"] and cosine >= MIN_COSINE


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-s"]))
