"""Launch contracts: the wrappers' asserts refuse layouts and dtypes the kernels do not handle.

The same ``check_*`` functions guard the Triton launch and the CPU path, so these run on CPU.
"""

from __future__ import annotations

import pytest
import torch

from kernels import cpu_ops, ops

CACHE = (4, 16, 2, 16)  # [num_pages, page_size, Hkv, D] of the tiny shape


def _attention(**overrides):
    args = dict(q=torch.zeros(1, 4, 16), k_cache=torch.zeros(CACHE), v_cache=torch.zeros(CACHE),
                block_table=torch.zeros(1, 1, dtype=torch.int32), query_start_loc=torch.tensor([0, 1], dtype=torch.int32),
                seq_lens=torch.tensor([1], dtype=torch.int32), scale=0.25)
    args.update(overrides)
    return ops.paged_attention(**args)


def _rope_store_kv(**overrides):
    args = dict(q=torch.zeros(2, 4, 16), k=torch.zeros(2, 2, 16), v=torch.zeros(2, 2, 16),
                positions=torch.tensor([0, 1]), cos_sin=torch.zeros(8, 16), k_cache=torch.zeros(CACHE),
                v_cache=torch.zeros(CACHE), slot_mapping=torch.tensor([0, 1]))
    args.update(overrides)
    return ops.rope_store_kv(**args)


@pytest.mark.parametrize("call, message", [
    (lambda: ops.linear(torch.zeros(64, 2).T, torch.zeros(128, 64)), "unit column stride"),
    (lambda: ops.linear(torch.zeros(1, 64).expand(3, 64), torch.zeros(128, 64)), "non-overlapping rows"),
    (lambda: ops.linear(torch.zeros(2, 64), torch.zeros(64, 128).T), "weight must be contiguous"),
    (lambda: ops.linear(torch.zeros(2, 64, dtype=torch.bfloat16), torch.zeros(128, 64), out_dtype=torch.float32),
     "must both be float32"),
    (lambda: ops.linear(torch.zeros(2, 32), torch.zeros(128, 64)), "K = 64"),
    (lambda: ops.rms_norm(torch.zeros(2, 64), torch.ones(64, dtype=torch.bfloat16), 1e-5), "weight must be"),
    (lambda: ops.rms_norm(torch.zeros(2, 64), torch.ones(64), 1e-5, torch.zeros(3, 64)), "is not (2, 64)"),
    (lambda: _rope_store_kv(cos_sin=torch.zeros(8, 16, dtype=torch.float64)), "float32"),
    (lambda: _rope_store_kv(positions=torch.tensor([0, 1], dtype=torch.int32)), "int64"),
    (lambda: ops.silu_mul(torch.zeros(256, 2).T), "unit column stride"),
    (lambda: ops.embedding(torch.zeros(2, dtype=torch.int32), torch.zeros(256, 64)), "int64"),
    (lambda: _rope_store_kv(k_cache=torch.zeros(16, 4, 2, 16).transpose(0, 1)), "must be contiguous"),
    (lambda: _rope_store_kv(v=torch.zeros(3, 2, 16)), "v shape (3, 2, 16) is not"),
    (lambda: _attention(block_table=torch.zeros(1, 1, dtype=torch.int64)), "int32"),
    (lambda: _attention(q=torch.zeros(1, 16, 4).transpose(1, 2)), "unit stride on head_dim"),
    (lambda: _attention(v_cache=torch.zeros(5, 16, 2, 16)), "differ in shape"),
], ids=["x-columns", "x-overlap", "weight-layout", "mixed-dtype", "k-mismatch", "norm-weight", "residual-shape",
        "rope-table", "rope-positions", "silu-layout", "ids-dtype", "cache-layout", "kv-count", "block-table",
        "q-layout", "cache-shapes"])
def test_malformed_launches_are_refused_before_any_work(plan_fp32, call, message):
    with pytest.raises(AssertionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()


def _split_entries():
    from kernels import configs
    from kernels.launch import require

    split, combine = (require(c) for c in configs.linear_configs(n=64, k=128, dtype="float32", has_bias=False,
                                                                  out_dtype="float32"))
    fold = require(configs.matmul_combine_norm_config(hidden_size=64, splits=4, eps=1e-5, dtype="float32"))
    return split, combine, fold


@pytest.mark.parametrize("call, message", [
    (lambda s, c, f: cpu_ops.matmul_split(torch.zeros(2, 128), torch.zeros(64, 128), torch.zeros(2, 2, 64), s),
     "is not (SPLITS, M, N) = (4, 2, 64)"),
    (lambda s, c, f: cpu_ops.matmul_split(torch.zeros(2, 128), torch.zeros(64, 128),
                                          torch.zeros(4, 2, 64, dtype=torch.bfloat16), s), "contiguous float32"),
    (lambda s, c, f: cpu_ops.matmul_combine(torch.zeros(4, 64, 2).transpose(1, 2), None, torch.zeros(2, 64), c),
     "contiguous float32"),
    (lambda s, c, f: cpu_ops.matmul_combine(torch.zeros(4, 2, 64), torch.zeros(64), torch.zeros(2, 64), c),
     "HAS_BIAS=False"),
    (lambda s, c, f: cpu_ops.matmul_combine_norm(torch.zeros(4, 3, 64), torch.zeros(2, 64), torch.ones(64),
                                                 torch.zeros(2, 64), torch.zeros(2, 64), f), "is not (SPLITS, T, H)"),
    (lambda s, c, f: cpu_ops.matmul_combine_norm(torch.zeros(4, 2, 64), torch.zeros(2, 64), torch.ones(64),
                                                 torch.zeros(64, 2).T, torch.zeros(2, 64), f), "must be contiguous"),
], ids=["partial-shape", "partial-dtype", "combine-layout", "combine-bias", "fold-rows", "fold-output"])
def test_malformed_split_k_launches_are_refused(plan_fp32, call, message):
    with pytest.raises(AssertionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call(*_split_entries())
