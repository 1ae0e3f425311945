"""The fixed split-K path on CPU: the fold fused into the residual norm keeps the separate fold's bits."""

from __future__ import annotations

import pytest
import torch

from kernels import ops
from tests.kernels.invariance import bits_equal
from tests.kernels.support import plan_dtype


def test_a_folded_residual_norm_has_the_bits_of_the_combine_then_the_norm(plan):
    """ops.rms_norm of split-K partials (one launch) equals the combine followed by the residual norm (two)."""
    s, dtype = plan.shape, plan_dtype(plan)
    gen = torch.Generator().manual_seed(11)
    x = torch.randn(37, s.intermediate_size, generator=gen).to(dtype)
    w = (torch.randn(s.hidden_size, s.intermediate_size, generator=gen) / 11).to(dtype)
    residual = torch.randn(37, s.hidden_size, generator=gen).to(dtype)
    norm_w = (torch.rand(s.hidden_size, generator=gen) + 0.5).to(dtype)
    branch = ops.linear_unfolded(x, w)
    assert isinstance(branch, ops.Partials) == (dtype == torch.float32)  # tiny's down splits in fp32 only
    fused = ops.rms_norm(branch, norm_w, s.rms_norm_eps, residual)
    separate = ops.rms_norm(ops.linear(x, w), norm_w, s.rms_norm_eps, residual)
    assert all(bits_equal(a, b) for a, b in zip(fused, separate))
    last = ops.select_rows(branch, torch.tensor([36, 2]))
    assert all(bits_equal(a, b[[36, 2]]) for a, b in zip(ops.rms_norm(last, norm_w, s.rms_norm_eps, residual[[36, 2]]),
                                                         separate))
    with pytest.raises(ValueError, match="needs the residual"):
        ops.rms_norm(ops.Partials(torch.zeros(4, 2, s.hidden_size)), norm_w, s.rms_norm_eps)


@pytest.fixture
def bf16_splits(monkeypatch):
    """bf16 plans split 4 ways, as float32 ones do (kernels/configs.py keeps them at one launch for
    now): the bf16 fold's arithmetic stays tested for when a tuned split table returns."""
    from functools import _lru_cache_wrapper

    from kernels import configs

    def clear():
        for value in vars(configs).values():
            if isinstance(value, _lru_cache_wrapper):
                value.cache_clear()

    monkeypatch.setitem(configs.SPLIT_K, "bfloat16", 4)
    clear()
    yield
    monkeypatch.undo()
    clear()


def test_the_bf16_fold_rounds_the_branch_before_the_residual_add(bf16_splits):
    """A bf16 shape whose down projection splits: the fused fold rounds the branch to bf16 first, as the
    separate combine stores it, so residual_out and out keep the two-launch bits."""
    from dataclasses import replace

    from kernels.launch import use_plan
    from kernels.plan import plan_for
    from kernels.shapes import preset

    shape = replace(preset("tiny"), intermediate_size=512, dtype="bfloat16")
    gen = torch.Generator().manual_seed(12)
    x = torch.randn(9, 512, generator=gen).bfloat16()
    w = (torch.randn(shape.hidden_size, 512, generator=gen) / 20).bfloat16()
    residual = (torch.randn(9, shape.hidden_size, generator=gen) * 3).bfloat16()
    norm_w = (torch.rand(shape.hidden_size, generator=gen) + 0.5).bfloat16()
    with use_plan(plan_for(shape)):
        branch = ops.linear_unfolded(x, w)
        assert isinstance(branch, ops.Partials) and branch.partial.shape[0] == 4
        fused = ops.rms_norm(branch, norm_w, shape.rms_norm_eps, residual)
        separate = ops.rms_norm(ops.linear(x, w), norm_w, shape.rms_norm_eps, residual)
        unrounded = (branch.partial.sum(0) + residual.float()).bfloat16()  # adding before rounding differs
    assert all(bits_equal(a, b) for a, b in zip(fused, separate))
    assert not bits_equal(unrounded, fused[1]), "the test data cannot tell the two roundings apart"
