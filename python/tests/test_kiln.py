"""The Python package on the CPU backend: compile zoo cases (real PyTorch exports), run
them, compare with onnxruntime's outputs; options, buffers, threads and errors."""

import os
import subprocess
import threading

import numpy as np
import pytest

import kiln
from conftest import zoo_case
from zoo_data import MAX_REL, MIN_COSINE, compare, read_set


def test_compile_flags_follow_the_cli():
    flags = kiln._compile_flags({"precision": "fp32", "fuse": False, "kernel_cache": True, "tune": True,
                                 "tune_budget": 30, "dim": {"batch": 8, "seq": 128},
                                 "input_shape": {"x": (1, 3, 224, 224)}, "arch": None, "tuning_db": False,
                                 "calibrate": ["x=random:1"]})
    assert flags == ["--precision=fp32", "--no-fuse", "--tune", "--tune-budget=30", "--dim=batch=8",
                     "--dim=seq=128", "--input-shape=x=1x3x224x224", "--no-tuning-db", "--calibrate=x=random:1"]


@pytest.mark.parametrize("case,precision", [("bert.legacy", "fp32"), ("mobilenet_v3.legacy", "fp16")])
def test_zoo_case_matches_onnxruntime(case, precision, tmp_path):
    case_dir = zoo_case(case)
    inputs = read_set(case_dir, "input_")
    expected = read_set(case_dir, "output_")
    bundle = tmp_path / "model.kiln"
    model = kiln.compile(case_dir / "model.onnx", bundle, precision=precision,
                         input_shape={name: a.shape for name, a in inputs.items()})
    assert bundle.exists() and model.path == str(bundle)
    assert model.precision == precision
    assert [t.name for t in model.inputs] == list(inputs)
    for t in model.inputs:
        assert t.shape == inputs[t.name].shape and t.dtype == str(inputs[t.name].dtype)
    session = model.session(device="cpu")
    assert session.stream is None
    outputs = session.run(inputs)
    assert set(outputs) == {t.name for t in model.outputs}
    for name, want in expected.items():
        got = outputs[name]
        assert isinstance(got, np.ndarray) and got.shape == want.shape
        rel, cosine = compare(got, want)
        print(f"{case} {precision} {name}: max rel diff {rel:.2e}, cosine {cosine:.6f}")
        assert rel <= MAX_REL[precision] and cosine >= MIN_COSINE


def test_a_dynamic_model_runs_at_sizes_in_its_ranges(tmp_path):
    # Compiled once for batch 1..4 and seq 1..64 (tuned for 16): the signature gives the
    # dims, the ranges and the size to tune for; a run at the data set's sizes matches onnxruntime, others give outputs of
    # their sizes, and a size outside the range is refused with the library's message.
    case_dir = zoo_case("bert.legacy")
    inputs = read_set(case_dir, "input_")
    expected = read_set(case_dir, "output_")
    model = kiln.compile(case_dir / "model.onnx", tmp_path / "d.kiln", precision="fp32",
                         dim={"batch": "1..4", "seq": "1..64:16"})
    assert model.dim_ranges == {"batch": (1, 4), "seq": (1, 64)}
    assert model.dim_opts == {"seq": 16}
    first = model.inputs[0]
    assert first.dims == ("batch", "seq") and first.shape == (4, 64) and first.min_shape == (1, 1)
    assert model.outputs[0].dims == ("batch", "seq", "64")
    session = model.session(device="cpu")
    outputs = session.run(inputs)
    for name, want in expected.items():
        rel, cosine = compare(outputs[name], want)
        assert outputs[name].shape == want.shape and rel <= MAX_REL["fp32"] and cosine >= MIN_COSINE
    short = {name: a[:1, :17] for name, a in inputs.items()}
    assert session.run(short)[model.outputs[0].name].shape == (1, 17, 64)
    with pytest.raises(kiln.InvalidArgumentError, match=r"dim 1 \(seq\) is 65, outside the range 1..64"):
        session.run({name: np.concatenate([a, a[:, :1]], axis=1) for name, a in inputs.items()})


def test_caller_buffers_are_written_and_returned(tmp_path):
    case_dir = zoo_case("mobilenet_v3.legacy")
    inputs = read_set(case_dir, "input_")
    model = kiln.compile(case_dir / "model.onnx", precision="fp32",
                         input_shape={n: a.shape for n, a in inputs.items()})
    assert not os.path.exists(model.path)  # a temporary bundle, removed once loaded
    with model.session(device="cpu") as session:
        want = session.run(inputs)
        name = model.outputs[0].name
        buffer = np.full(model.outputs[0].shape, np.nan, dtype=np.float32)
        got = session.run(inputs, outputs={name: buffer})
        assert list(got) == [name] and got[name] is buffer
        np.testing.assert_array_equal(buffer, want[name])
        with pytest.raises(kiln.InvalidArgumentError, match="must be float32"):
            session.run(inputs, outputs={name: np.zeros(model.outputs[0].shape, np.float64)})
        with pytest.raises(kiln.InvalidArgumentError, match="unknown output 'nope'"):
            session.run(inputs, outputs={"nope": buffer})


def test_sessions_share_a_model_across_threads(tmp_path):
    case_dir = zoo_case("bert.legacy")
    inputs = read_set(case_dir, "input_")
    model = kiln.compile(case_dir / "model.onnx", tmp_path / "b.kiln", precision="fp32",
                         input_shape={n: a.shape for n, a in inputs.items()})
    want = model.session(device="cpu").run(inputs)
    results, errors = [None] * 3, []

    def work(i):
        try:
            results[i] = model.session(device="cpu").run(inputs)
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for r in results:
        for name in want:
            np.testing.assert_array_equal(r[name], want[name])


def test_an_empty_batch_compiles_and_runs(tmp_path):
    # Every kernel of a CNN (pools, depthwise convs) gets a valid launch for batch 0.
    model = kiln.compile(zoo_case("efficientnet.legacy") / "model.onnx", tmp_path / "e.kiln", dim={"batch": 0})
    out = model.session(device="cpu").run({"pixel_values": np.zeros((0, 3, 128, 128), np.float32)})
    assert out[model.outputs[0].name].shape == (0, 10)


def test_bad_input_raises_with_kilns_message(tmp_path):
    case_dir = zoo_case("bert.legacy")
    inputs = read_set(case_dir, "input_")
    model = kiln.compile(case_dir / "model.onnx", tmp_path / "b.kiln", precision="fp32",
                         input_shape={n: a.shape for n, a in inputs.items()})
    session = model.session(device="cpu")
    first = model.inputs[0]
    with pytest.raises(kiln.InvalidArgumentError, match=f"missing input '{model.inputs[1].name}'"):
        session.run({first.name: inputs[first.name]})
    with pytest.raises(kiln.InvalidArgumentError, match="unknown input 'tokens'"):
        session.run({**inputs, "tokens": inputs[first.name]})
    with pytest.raises(ValueError, match=r"must be int64\[2, 64\], got float64"):
        session.run({**inputs, first.name: inputs[first.name].astype(np.float64)})
    with pytest.raises(kiln.InvalidArgumentError, match=r"must be i64\[2,64\], got i64\[2,63\]"):
        session.run({**inputs, first.name: inputs[first.name][:, :63]})
    with pytest.raises(kiln.InvalidArgumentError, match="takes a dict"):
        session.run([inputs[first.name]])
    with pytest.raises(kiln.InvalidArgumentError, match="device must be"):
        model.session(device="tpu")


def test_bad_files_and_options_raise(tmp_path):
    with pytest.raises(kiln.NotFoundError, match="/nonexistent.kiln") as e:
        kiln.load("/nonexistent.kiln")
    assert isinstance(e.value, FileNotFoundError) and e.value.code == "NOT_FOUND"
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x08\x07junk")
    with pytest.raises(kiln.InvalidArgumentError, match="junk.onnx"):
        kiln.load(junk)
    with pytest.raises(kiln.Error, match="junk.onnx"):
        kiln.compile(junk, tmp_path / "junk.kiln")
    assert not (tmp_path / "junk.kiln").exists()
    case_dir = zoo_case("mobilenet_v3.legacy")
    with pytest.raises(kiln.InvalidArgumentError, match="unknown option --colour"):
        kiln.compile(case_dir / "model.onnx", tmp_path / "m.kiln", colour="blue")
    with pytest.raises(kiln.InvalidArgumentError, match="unsupported --precision 'fp8'"):
        kiln.compile(case_dir / "model.onnx", tmp_path / "m.kiln", precision="fp8")
    assert not (tmp_path / "m.kiln").exists()


@pytest.mark.skipif(kiln.gpu_available(), reason="checks the error on a machine without a GPU")
def test_gpu_session_without_a_gpu_says_so(tmp_path):
    make_model = os.environ.get("KILN_MAKE_MODEL")
    if not make_model:
        pytest.skip("KILN_MAKE_MODEL (build/models/kiln_make_model) is not set")
    subprocess.run([make_model, "mlp", "-o", str(tmp_path / "mlp.onnx")], check=True, capture_output=True)
    model = kiln.compile(tmp_path / "mlp.onnx", tmp_path / "mlp.kiln")
    with pytest.raises(kiln.FailedPreconditionError, match="no CUDA GPU"):
        model.session(device="gpu")
    assert model.session(device="cpu").run({"x": np.ones((1, 256), np.float32)})["probs"].shape == (1, 10)
