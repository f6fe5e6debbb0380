"""Makes `import kiln` find this checkout's package, and gives the tests the zoo."""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def zoo_case(name):
    """The directory of zoo case `name`; skips the test without $KILN_ZOO_DATA."""
    root = os.environ.get("KILN_ZOO_DATA")
    if not root:
        pytest.skip("KILN_ZOO_DATA is not set (the real PyTorch exports, ../shared/data/zoo)")
    path = Path(root) / name
    if not (path / "model.onnx").exists():
        pytest.skip(f"no zoo case {name} in {root}")
    return path
