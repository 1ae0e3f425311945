"""The Triton kernels under Triton's CPU interpreter (see interpreter_checks.py for its limits)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kernels.plan import REPO_ROOT
from tests.kernels.interpreter_checks import CHECKS, DTYPES

LABELS = [f"{name}-{dtype}" for dtype in DTYPES for name in CHECKS]


@pytest.fixture(scope="module")
def interpreted_results() -> dict:
    """Run every check once in a subprocess with TRITON_INTERPRET=1."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-m", "tests.kernels.interpreter_checks"], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"interpreter worker failed:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("label", LABELS)
def test_kernel_under_the_interpreter(interpreted_results, label):
    result = interpreted_results[label]
    if result["status"] == "unsupported":
        pytest.skip(result["detail"])
    assert result["status"] == "ok", result["detail"]
