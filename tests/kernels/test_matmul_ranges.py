"""Fixed K ranges inside one matmul program, on the CPU path: the split-K pair's bits, rows invariant,
and a wrapper that refuses ranges it cannot run."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from kernels import configs, cpu_ops
from kernels.launch_config import LaunchConfig
from kernels.plan import PlanEntry
from tests.kernels.invariance import bits_equal

N, K = 2048, 8192  # llama-1b's down projection: 4 ranges in bf16


def _entry(config: LaunchConfig) -> PlanEntry:
    return PlanEntry.from_config(config, ("test",))


def _cpu_matmul(x: torch.Tensor, w: torch.Tensor, entry: PlanEntry) -> torch.Tensor:
    out = torch.empty(x.shape[0], N, dtype=getattr(torch, entry.constexpr_dict()["OUT_DTYPE"]))
    cpu_ops.matmul(x, w, None, out, entry)
    return out


@pytest.fixture(scope="module")
def operands() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(21)
    # exponents over 2^-8 .. 2^8: a changed order of the K sums shows in the low bits
    x = (torch.randn(5, K, generator=gen) * torch.exp2(torch.randint(-8, 9, (5, K), generator=gen).float()))
    w = torch.randn(N, K, generator=gen) / 64
    return x.to(torch.bfloat16), w.to(torch.bfloat16)


def test_the_ranges_have_the_bits_of_the_split_k_pair_in_every_bucket(operands):
    x, w = operands
    assert configs.matmul_ranges(n=N, k=K, dtype="bfloat16") == 4
    kwargs = {"n": N, "k": K, "dtype": "bfloat16", "has_bias": False, "out_dtype": "float32"}  # fp32: every bit shows
    decode, other = _entry(configs.decode_matmul_config(**kwargs)), _entry(configs.matmul_config(**kwargs))
    assert decode.constexpr_dict()["LOCKSTEP"] and not other.constexpr_dict()["LOCKSTEP"]
    # the same four ranges as two launches: partials, then the fold in ascending order
    split = dataclasses.replace(configs.matmul_split_config(n=1024, k=K, dtype="float32"), key="matmul_split.test",
                                constexprs=tuple(sorted({"N": N, "K": K, "BLOCK_M": 64, "BLOCK_N": 32,
                                                         "BLOCK_K": 128, "SPLITS": 4}.items())),
                                static=(("dtype", "bfloat16"), ("k", K), ("n", N)))
    combine = configs.matmul_combine_config(n=N, splits=4, dtype="bfloat16", has_bias=False, out_dtype="float32")
    partial = torch.empty(4, x.shape[0], N, dtype=torch.float32)
    cpu_ops.matmul_split(x, w, partial, _entry(split))
    pair = torch.empty(x.shape[0], N, dtype=torch.float32)
    cpu_ops.matmul_combine(partial, None, pair, _entry(combine))
    for entry in (decode, other):  # (the prefill bucket's entry needs 1,024 rows; its CPU arithmetic is other's)
        assert bits_equal(_cpu_matmul(x, w, entry), pair), entry.key
    c = {**other.constexpr_dict(), "SPLITS": 1, "LOCKSTEP": False}  # the control: one range, same K steps
    one_range = _entry(dataclasses.replace(other.config(), key="matmul.one_range", constexprs=tuple(sorted(c.items()))))
    assert not bits_equal(_cpu_matmul(x, w, one_range), pair), "one range over all of K must sum otherwise"

def test_a_row_keeps_its_bits_whatever_else_is_in_the_batch(operands):
    x, w = operands
    decode = _entry(configs.decode_matmul_config(n=N, k=K, dtype="bfloat16", has_bias=False, out_dtype="bfloat16"))
    full = _cpu_matmul(x, w, decode)
    for rows in ([3], [4, 0], [2, 1, 3]):
        assert bits_equal(_cpu_matmul(x[rows], w, decode), full[rows])


@pytest.mark.parametrize("splits,lockstep,k,message", [(3, True, 8190, "side-by-side ranges need 2 or 4"),
                                                        (8, True, K, "side-by-side ranges need 2 or 4"),
                                                        (3, False, K, "is not cut into 3 equal ranges")])
def test_ranges_the_kernel_cannot_run_are_refused(operands, splits, lockstep, k, message):
    x, w = operands
    config = configs.decode_matmul_config(n=N, k=K, dtype="bfloat16", has_bias=False, out_dtype="bfloat16")
    c = {**dict(config.constexprs), "SPLITS": splits, "LOCKSTEP": lockstep, "K": k}
    bad = _entry(dataclasses.replace(config, key="matmul.bad", constexprs=tuple(sorted(c.items()))))
    with pytest.raises(AssertionError, match=message):
        _cpu_matmul(x[:, :k].contiguous(), w[:, :k].contiguous(), bad)
