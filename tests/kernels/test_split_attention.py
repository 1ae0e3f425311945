"""The plan's split-KV attention pair (kernels/attention.py, kernels/attention_combine.py) under
Triton's CPU interpreter, at tiles smaller than the plan's.

A 100-token request crosses four segments of SEG = 32 keys (KV tiles of 16, query blocks of 16):
its output in float32 must be within the fp32 tolerance of the float64 reference, and every
query's bits must be the same as a full prefill, as chunks beside other requests (NaN-filled
neighbours, poisoned free slots) and as decode steps. The interpreter's ``tl.dot`` is replaced as
in interpreter_checks.py (its numpy matmul is not row-position independent; on the GPU that is a
trusted premise). Running this file as a module performs the check and prints one JSON object;
the test runs it in a subprocess because the interpreter must be chosen before triton.language
is imported.
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

# Tiles and segments small enough that a 100-token request spans several of each.
BLOCK_Q, BLOCK_N, SEG = 16, 16, 32
LENGTH = 100


def split_schedule_check() -> dict:
    """{"failures": [...], "detail": str} of the accuracy and schedule checks (interpreter only)."""
    from bench.sweep_cases import attention_call, with_config
    from kernels import configs
    from kernels.launch import require, use_plan
    from kernels.plan import plan_for
    from tests.kernels import reference
    from tests.kernels.attention_cases import Step, make_request, run_steps, schedule_failures
    from tests.kernels.interpreter_checks import SHAPE

    dtype, scale = torch.float32, SHAPE.head_dim ** -0.5
    with use_plan(plan_for(replace(SHAPE, dtype="float32"))):
        entry = require(configs.paged_attention_config(num_heads=2, num_kv_heads=1, head_dim=16, page_size=16,
                                                       scale=scale, dtype="float32"))
    entry = with_config(entry, {"BLOCK_Q": BLOCK_Q, "BLOCK_N": BLOCK_N, "SEG": SEG}, entry.num_warps,
                        entry.num_stages)
    split = attention_call(entry, "plan")
    request = make_request(LENGTH, 2, 1, 16, dtype, torch.Generator().manual_seed(11))
    full = run_steps([Step(request, 0, LENGTH)], page_size=16, scale=scale, gen=torch.Generator().manual_seed(11),
                     attention=split)[0]
    reference.assert_close(full, reference.attention(request, scale), dtype, what="interpreted split attention")
    other = make_request(40, 2, 1, 16, dtype, torch.Generator().manual_seed(12), fill="nan")
    # chunks that end inside a segment, span a segment boundary, decode at the first key of a segment,
    # and the rest; then decode steps across the last boundary
    chunks = [(0, 20), (20, 63), (63, 64), (64, 96), (96, 97), (97, 100)]
    companions = [[], [Step(other, 0, 40)], [Step(other, 39, 40)], [Step(other, 10, 30)], [], [Step(other, 0, 5)]]
    failures = schedule_failures(request, chunks, companions, [0, 1, 0, 1, 0, 1], page_size=16, scale=scale, seed=11,
                                 poison="nan", attention=split)
    return {"failures": failures, "detail": f"{len(chunks)} steps of a {LENGTH}-token request over "
                                            f"{-(-LENGTH // SEG)} segments: accurate, bitwise equal to its prefill"}


def main() -> int:
    from tests.kernels.interpreter_checks import prepare_interpreter_worker

    if not prepare_interpreter_worker():
        return 2
    print(json.dumps(split_schedule_check()))
    return 0


@pytest.mark.slow
def test_split_attention_is_accurate_and_schedule_invariant_under_the_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-m", "tests.kernels.test_split_attention"], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"interpreter worker failed:\n{done.stderr[-4000:]}"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert not result["failures"], result["failures"]


if __name__ == "__main__":
    sys.exit(main())
