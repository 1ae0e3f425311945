"""Shared settings and plans for the kernel tests."""

from __future__ import annotations

from dataclasses import replace

import torch
from hypothesis import HealthCheck, settings

from kernels.plan import SealedPlan, plan_for
from kernels.shapes import preset
from kernels.tensors import torch_dtype

# Hypothesis for kernel tests: reproducible in CI, no deadline (shared 2-core machines).
KERNEL_SETTINGS = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                           suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def tiny_plan(dtype: str) -> SealedPlan:
    """The plan of the "tiny" preset with the given activation dtype."""
    return plan_for(replace(preset("tiny"), dtype=dtype))


def plan_dtype(plan: SealedPlan) -> torch.dtype:
    """The torch dtype of a plan's activations and weights."""
    return torch_dtype(plan.shape.dtype)
