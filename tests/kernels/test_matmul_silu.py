"""The gate/up projection with SiLU·up in its epilogue (kernels/matmul_silu.py) on the CPU path:
the bits of the matmul then silu_mul in every bucket, its plan entries, its contract."""

from __future__ import annotations

import pytest
import torch

from kernels import configs, cpu_ops, ops
from kernels.launch import record_launches, require
from kernels.plan import preset_plan
from tests.kernels.invariance import bits_equal, fill_rows
from tests.kernels.support import plan_dtype


@pytest.mark.parametrize("num_rows", [1, 3, 16, 17, 40, 63, 64, 100])
def test_one_launch_has_the_bits_of_the_matmul_then_silu_mul(plan, num_rows):
    s, dtype = plan.shape, plan_dtype(plan)
    gen = torch.Generator().manual_seed(num_rows)
    x = fill_rows("random", (num_rows, s.hidden_size), dtype, gen) * 4
    w = (torch.randn(2 * s.intermediate_size, s.hidden_size, generator=gen) / 4).to(dtype)
    with record_launches() as records:
        fused = ops.gate_up_silu_mul(x, w)
    assert [r.kernel for r in records] == ["matmul_silu"]
    assert bits_equal(fused, ops.silu_mul(ops.linear(x, w)))


def test_the_buckets_follow_the_gate_up_weight_s(plan):
    s = plan.shape
    dtype, n = s.dtype, 2 * s.intermediate_size
    for num_rows in (1, 16, 17, 63, configs.PREFILL_ROWS[dtype], 5000):
        fused, = configs.matmul_silu_configs(intermediate_size=s.intermediate_size, k=s.hidden_size, dtype=dtype,
                                             num_rows=num_rows)
        matmul, = configs.linear_configs(n=n, k=s.hidden_size, dtype=dtype, has_bias=False, out_dtype=dtype,
                                         num_rows=num_rows)
        f, m = fused.constexpr_dict(), matmul.constexpr_dict()
        assert fused.key.removeprefix(f"matmul_silu.i{s.intermediate_size}") == \
            matmul.key.removeprefix(f"matmul.n{n}"), (fused.key, matmul.key)
        # the same K order and row tile; the columns shared between gate and up
        assert (f["BLOCK_K"], f["BLOCK_M"], 2 * f["BLOCK_N"], f["N_MAJOR"]) == \
            (m["BLOCK_K"], m["BLOCK_M"], m["BLOCK_N"], m["N_MAJOR"])
        assert (fused.num_warps, fused.num_stages) == (matmul.num_warps, matmul.num_stages)
    every = configs.matmul_silu_configs(intermediate_size=s.intermediate_size, k=s.hidden_size, dtype=dtype)
    assert {c.key for c in every} <= {e.key for e in plan.entries}


def test_a_split_gate_up_weight_runs_as_the_split_pair_then_silu_mul(plan_fp32):
    # a narrow, deep weight takes the fixed split-K pair (kernels/matmul_configs.py matmul_splits)
    width, k = 16, 1024
    assert configs.matmul_splits(n=2 * width, k=k, dtype="float32") > 1
    assert configs.matmul_silu_configs(intermediate_size=width, k=k, dtype="float32") == ()
    assert configs.matmul_silu_configs(intermediate_size=width, k=k, dtype="float32", num_rows=4) == ()


def test_llama_1b_plans_one_fused_launch_per_bucket():
    keys = sorted(e.key for e in preset_plan("llama-1b").entries if e.kernel == "matmul_silu")
    assert keys == ["matmul_silu.i8192_k2048", "matmul_silu.i8192_k2048_m16", "matmul_silu.i8192_k2048_p1024"]


@pytest.mark.parametrize("make,message", [
    (lambda x, w, o: (x, w[:-2], o), r"is not \(2 I, K\)"),
    (lambda x, w, o: (x[:, :32], w, o), "columns"),
    (lambda x, w, o: (x, w, o[:, :64]), "out shape"),
    (lambda x, w, o: (x.double(), w, o), "must all be"),
    (lambda x, w, o: (x, w.T.contiguous().T, o), "weight must be contiguous"),
    (lambda x, w, o: (torch.zeros(64, 3).T, w, o), "unit column stride"),
])
def test_contract_violations_name_the_problem(plan_fp32, make, message):
    s = plan_fp32.shape
    entry = require(configs.matmul_silu_configs(intermediate_size=s.intermediate_size, k=s.hidden_size,
                                                dtype="float32", num_rows=3)[0])
    args = make(torch.zeros(3, s.hidden_size), torch.zeros(2 * s.intermediate_size, s.hidden_size),
                torch.zeros(3, s.intermediate_size))
    with pytest.raises(AssertionError, match=message):
        cpu_ops.matmul_silu(*args, entry)


def test_a_bucket_entry_refuses_rows_outside_its_bucket(plan_fp32):
    s = plan_fp32.shape
    decode = require(configs.matmul_silu_configs(intermediate_size=s.intermediate_size, k=s.hidden_size,
                                                 dtype="float32", num_rows=1)[0])
    with pytest.raises(AssertionError, match="at most 16 rows"):
        cpu_ops.matmul_silu(torch.zeros(17, s.hidden_size), torch.zeros(2 * s.intermediate_size, s.hidden_size),
                            torch.zeros(17, s.intermediate_size), decode)
