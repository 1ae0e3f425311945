"""Sliding-window attention on the GPU in bf16: prefill, chunked prefill and decode give each
query the same bits beside any companions, close to the float64 reference, at head_dim 256
(Gemma3-1B's attention: 64-key tiles, 512-key segments and window) and at head_dim 64 with a
window that is no multiple of the tile."""

from __future__ import annotations

import functools
from dataclasses import replace

import pytest
import torch

from kernels import ops
from kernels.launch import use_plan
from kernels.plan import plan_for
from kernels.shapes import ModelShape, preset
from tests.kernels import reference
from tests.kernels.attention_cases import Step, chunk_bounds, make_request, run_steps, schedule_failures

DEVICE = "cuda"
GEMMA3_1B = ModelShape(hidden_size=1152, num_layers=26, num_heads=4, num_kv_heads=1, head_dim=256,
                       intermediate_size=6912, vocab_size=262144, dtype="bfloat16", attention_windows=(0, 512))
LLAMA_1B_WINDOWED = replace(preset("llama-1b"), attention_windows=(0, 300), attn_softcap=50.0)


def _seg(plan) -> int:
    return next(e for e in plan.entries if e.kernel == "paged_attention").constexpr_dict()["SEG"]


@pytest.mark.parametrize("shape,window", [(GEMMA3_1B, 512), (GEMMA3_1B, 0), (LLAMA_1B_WINDOWED, 300)],
                         ids=["d256-w512", "d256-full", "d64-w300-cap50"])
def test_windowed_prefill_chunks_and_decode_agree_and_are_accurate(shape, window):
    plan = plan_for(shape)
    s, softcap = plan.shape, plan.shape.attn_softcap
    attention = functools.partial(ops.paged_attention, window=window, softcap=softcap)
    seg, scale = _seg(plan), s.head_dim ** -0.5
    gen = torch.Generator().manual_seed(7)
    length = 2 * seg + 200  # three segments; the window's start crosses tiles and segments
    request = make_request(length, s.num_heads, s.num_kv_heads, s.head_dim, torch.bfloat16, gen)
    others = [make_request(n, s.num_heads, s.num_kv_heads, s.head_dim, torch.bfloat16, gen, fill=f)
              for n, f in ((seg + 129, "random"), (33, "huge"), (17, "nan"))]
    cuts = [63, 64, 65, 299, 300, 301, seg - 1, seg, seg + 1, seg + 511, seg + 512, 2 * seg + 1]
    chunks = chunk_bounds(length - 20, cuts) + [(p, p + 1) for p in range(length - 20, length)]
    companions = [[Step(o, 0, o.length) for o in others[: i % 4]] for i in range(len(chunks))]
    with use_plan(plan):
        failures = schedule_failures(request, chunks, companions, [i % 3 for i in range(len(chunks))],
                                     page_size=s.page_size, scale=scale, seed=7, poison="nan", device=DEVICE,
                                     attention=attention)
        got = run_steps([Step(request, 0, length)], page_size=s.page_size, scale=scale, gen=gen, device=DEVICE,
                        attention=attention)[0]
    assert not failures, failures[:3]
    reference.assert_close(got, reference.attention(request, scale, window=window, softcap=softcap), torch.bfloat16,
                           what=f"attention d{s.head_dim} window {window} softcap {softcap}")
