"""Fixtures for the kernel tests: tiny-shape plans in fp32 and bf16, activated per test."""

from __future__ import annotations

import pytest
import torch

from kernels.launch import use_plan
from tests.kernels.support import tiny_plan


@pytest.fixture(params=["float32", "bfloat16"])
def plan(request: pytest.FixtureRequest):
    """The tiny plan in each dtype, active for the test."""
    active = tiny_plan(request.param)
    with use_plan(active):
        yield active


@pytest.fixture
def plan_fp32():
    """The tiny fp32 plan, active for the test."""
    active = tiny_plan("float32")
    with use_plan(active):
        yield active


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Run kernel tests on one intra-op thread: faster on shared 2-core machines (results of the
    CPU path do not depend on the thread count; test_rowwise_invariance checks that)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
