"""The run-time finiteness flags of the compiled Triton kernels on the GPU, fp32 and bf16 (tiny plans).

The same cases as the CPU path (tests/kernels/test_finiteness.py) and the interpreter: exactly the
poisoned (token, head) flagged, q, K/V and an overflowing score caught, companions bitwise unchanged.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from kernels import configs, ops
from kernels.attention_combine import launch_attention_combine
from kernels.launch import require, use_plan
from kernels.plan import plan_for
from kernels.rope_store_kv import launch_rope_store_kv
from kernels.shapes import preset
from tests.kernels.finiteness_cases import attention_flag_failures, combine_flag_failures, rope_store_kv_flag_failures

TINY = preset("tiny")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_compiled_kernels_flag_exactly_the_poisoned_rows(dtype):
    with use_plan(plan_for(replace(TINY, dtype=dtype))):
        attention = configs.paged_attention_config(num_heads=TINY.num_heads, num_kv_heads=TINY.num_kv_heads,
                                                   head_dim=TINY.head_dim, page_size=TINY.page_size,
                                                   scale=TINY.head_dim ** -0.5, dtype=dtype)
        combine = require(configs.attention_combine_config(num_heads=TINY.num_heads, head_dim=TINY.head_dim,
                                                           seg=attention.constexpr_dict()["SEG"], dtype=dtype))
        store = require(configs.rope_store_kv_config(num_heads=TINY.num_heads, num_kv_heads=TINY.num_kv_heads,
                                                     head_dim=TINY.head_dim, page_size=TINY.page_size, dtype=dtype))
        failures = rope_store_kv_flag_failures(launch_rope_store_kv, store, dtype=DTYPES[dtype], device="cuda")
        failures += combine_flag_failures(launch_attention_combine, combine, dtype=DTYPES[dtype], device="cuda")
        failures += attention_flag_failures(ops.paged_attention, num_heads=TINY.num_heads,
                                            num_kv_heads=TINY.num_kv_heads, head_dim=TINY.head_dim,
                                            page_size=TINY.page_size, dtype=DTYPES[dtype], device="cuda")
    assert failures == []
