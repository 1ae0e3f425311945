"""bench/attention_diagonal.py's prototype under Triton's CPU interpreter: the one-kernel prefill
attention with the masks left off the tiles no row masks must give the plan kernel's bits, and
leaving the diagonal tile unmasked too (the control) must not.

Float32 at tiles smaller than the plan's (query blocks of 8, KV tiles of 16, segments of 32), with
the interpreter's ``tl.dot`` made row-position independent as in interpreter_checks.py: fresh
prompts, prompts after cached positions (query blocks that start inside a tile, requests whose
first block is not aligned), a softcap, and KV slots past each request's length filled with NaN.
Runs in a subprocess, since the interpreter is chosen before triton.language is imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from kernels.plan import REPO_ROOT

BLOCK_Q, BLOCK_N, SEG, PAGE = 8, 16, 32, 16
# (query tokens per request, cached positions per request)
CASES = (((70,), (0,)), ((37, 29), (50, 3)), ((5, 64, 1), (91, 0, 40)))


def _entry(softcap: float):
    from bench.sweep_cases import with_config
    from kernels import configs
    from kernels.launch import require, use_plan
    from kernels.plan import plan_for
    from tests.kernels.interpreter_checks import SHAPE

    shape = replace(SHAPE, dtype="float32", attn_softcap=softcap)
    with use_plan(plan_for(shape)):
        entry = require(configs.prefill_attention_config(num_heads=2, num_kv_heads=1, head_dim=16, page_size=PAGE,
                                                         scale=0.25, dtype="float32", softcap=softcap))
    return with_config(entry, {"BLOCK_Q": BLOCK_Q, "BLOCK_N": BLOCK_N, "SEG": SEG}, entry.num_warps,
                       entry.num_stages)


def _inputs(q_lens: tuple, contexts: tuple, gen: torch.Generator) -> tuple:
    """q, k_cache, v_cache, block_table, query_start_loc, seq_lens, seq_idx: pages shuffled, values over
    a wide range of exponents, every slot past a request's length NaN."""
    from kernels import metadata

    kv_lens = [q + c for q, c in zip(q_lens, contexts)]
    width = max(-(-n // PAGE) for n in kv_lens)
    num_pages = width * len(kv_lens)

    def wide(*shape):
        return torch.randn(*shape, generator=gen) * torch.exp2(torch.randint(-6, 7, shape, generator=gen).float())

    k_cache, v_cache = wide(num_pages, PAGE, 1, 16), wide(num_pages, PAGE, 1, 16)
    table = torch.randperm(num_pages, generator=gen).view(len(kv_lens), width).to(torch.int32)
    for row, n in enumerate(kv_lens):
        for pos in range(n, width * PAGE):
            k_cache[table[row, pos // PAGE], pos % PAGE] = float("nan")
            v_cache[table[row, pos // PAGE], pos % PAGE] = float("nan")
    q = wide(sum(q_lens), 2, 16)
    starts = torch.tensor([0, *torch.tensor(q_lens).cumsum(0).tolist()], dtype=torch.int32)
    lens = torch.tensor(kv_lens, dtype=torch.int32)
    return q, k_cache, v_cache, table, starts, lens, metadata.token_requests(starts, q.shape[0])


def interpreted_differences() -> dict:
    """{form: elements whose bits differ from the plan kernel's, over every case and softcap}."""
    from bench.attention_diagonal import launch_diagonal_attention
    from kernels.attention_prefill import launch_attention_prefill
    from tests.kernels.interpreter_checks import prepare_interpreter_worker

    assert prepare_interpreter_worker()
    gen = torch.Generator().manual_seed(3)
    differ = {"prototype": 0, "control (the diagonal tile unmasked)": 0}
    for softcap in (0.0, 5.0):
        entry = _entry(softcap)
        for q_lens, contexts in CASES:
            inputs = _inputs(q_lens, contexts, gen)
            outs = {}
            for name, launch in (("plan", launch_attention_prefill), ("prototype", launch_diagonal_attention),
                                 ("control (the diagonal tile unmasked)",
                                  lambda *a: launch_diagonal_attention(*a, extra_open=1))):
                out, flags = torch.empty_like(inputs[0]), torch.full(inputs[0].shape[:2], -1.0)
                launch(*inputs, out, flags, entry)
                outs[name] = torch.cat([out.flatten(), flags.flatten()]).view(torch.int32)
            for name in differ:
                differ[name] += int((outs[name] != outs["plan"]).sum())
    return differ


@pytest.mark.slow
def test_the_prototype_keeps_the_plan_kernel_s_bits_and_the_control_does_not():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", "import json, tests.kernels.test_attention_diagonal as t; "
                           "print(json.dumps(t.interpreted_differences()))"], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    differ = json.loads(done.stdout.strip().splitlines()[-1])
    assert differ["prototype"] == 0, differ
    assert differ["control (the diagonal tile unmasked)"] > 0, differ


@pytest.mark.slow
def test_the_prototype_compiles_for_sm90_at_the_llama_1b_entries():
    from kernels.plan import preset_plan
    from tests.kernels.test_gpu_compile import compile_for_sm90

    entries = [e for e in preset_plan("llama-1b").entries if e.kernel == "attention_prefill"]
    assert entries
    for entry in entries:
        compiled = compile_for_sm90(replace(entry, function="bench.attention_diagonal.diagonal_attention_kernel"))
        assert compiled.asm["cubin"] and "griddepcontrol.wait" in compiled.asm["ptx"], entry.key
