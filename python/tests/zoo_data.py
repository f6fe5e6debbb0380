"""A zoo case's inputs and expected outputs (onnxruntime's), and the zoo's comparison."""

import numpy as np

from onnx_tensor import read_tensor

# As the C++ zoo test (tests/zoo/zoo_runner.h): max |got - want| <= MAX_REL * max |want|
# and cosine(got, want) >= MIN_COSINE for fp16 storage; fp32 is held tighter.
MAX_REL = {"fp16": 2e-2, "fp32": 1e-3}
MIN_COSINE = 0.9999


def read_set(case_dir, prefix):
    """{name: array} of test_data_set_0/<prefix>K.pb, K = 0, 1, ..."""
    out, k = {}, 0
    while (case_dir / "test_data_set_0" / f"{prefix}{k}.pb").exists():
        name, array = read_tensor(case_dir / "test_data_set_0" / f"{prefix}{k}.pb")
        out[name] = array
        k += 1
    return out


def compare(got, want):
    """(max |got - want| / max |want|, cosine) over the finite expected values."""
    got, want = np.asarray(got, np.float64).ravel(), np.asarray(want, np.float64).ravel()
    finite = np.isfinite(want)
    g, w = got[finite], want[finite]
    rel = np.max(np.abs(g - w)) / max(np.max(np.abs(w)), 1e-30)
    cosine = float(g @ w / np.sqrt((g @ g) * (w @ w))) if (g @ g) > 0 and (w @ w) > 0 else float((g @ g) == (w @ w))
    return float(rel), cosine
