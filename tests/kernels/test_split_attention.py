"""The plan's split-KV attention pair (kernels/attention.py, kernels/attention_combine.py) and its
one-kernel form (kernels/attention_prefill.py) under Triton's CPU interpreter, at tiles smaller
than the plan's.

A 100-token request crosses four segments of SEG = 32 keys (KV tiles of 16, query blocks of 16),
in full causal attention and with sliding windows of 7, 20 and 45 keys (one with a softcap):
its output in float32 must be within the fp32 tolerance of the float64 reference, and every
query's bits must be the same as a full prefill, as chunks beside other requests (NaN-filled
neighbours, poisoned free slots) and as decode steps; for full causal attention (with and without
a softcap) also with the launches of at least MIXED_TOKENS tokens (the full prefill, the longer
chunks) in the one-kernel form, whose rows must carry the pair's bits. The interpreter's ``tl.dot`` is replaced as
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
# Launches from this many tokens take the one-kernel form in the mixed schedule.
MIXED_TOKENS = 40


def _split_entry(window: int = 0, softcap: float = 0.0, kernel: str = "paged_attention"):
    """The plan's float32 attention entry of SHAPE (with ``window``/``softcap``) at the small tiles:
    the pair's first half, or with ``kernel="attention_prefill"`` the one-kernel form."""
    from bench.sweep_cases import with_config
    from kernels import configs
    from kernels.launch import require, use_plan
    from kernels.plan import plan_for
    from tests.kernels.interpreter_checks import SHAPE

    shape = replace(SHAPE, dtype="float32", attention_windows=tuple(sorted({0, window})), attn_softcap=softcap)
    common = dict(num_heads=2, num_kv_heads=1, head_dim=16, page_size=16, scale=SHAPE.head_dim ** -0.5,
                  dtype="float32", softcap=softcap)
    with use_plan(plan_for(shape)):
        entry = require(configs.prefill_attention_config(**common) if kernel == "attention_prefill"
                        else configs.paged_attention_config(**common, window=window))
    return with_config(entry, {"BLOCK_Q": BLOCK_Q, "BLOCK_N": BLOCK_N, "SEG": SEG}, entry.num_warps, entry.num_stages)


def _schedule_failures(window: int = 0, softcap: float = 0.0, mixed: bool = False) -> list[str]:
    """Accuracy against the float64 reference, then the schedule check, of one (window, softcap);
    ``mixed``: launches of MIXED_TOKENS tokens or more in the one-kernel form."""
    from bench.sweep_cases import attention_call
    from tests.kernels import reference
    from tests.kernels.attention_cases import Step, make_request, one_kernel_attention, run_steps, schedule_failures

    dtype, scale = torch.float32, 16 ** -0.5
    split = attention_call(_split_entry(window, softcap), "plan")
    if mixed:
        pair, one = split, one_kernel_attention(kernel=True, entry=_split_entry(window, softcap, "attention_prefill"))
        split = lambda q, *rest: (one if q.shape[0] >= MIXED_TOKENS else pair)(q, *rest)  # noqa: E731
    request = make_request(LENGTH, 2, 1, 16, dtype, torch.Generator().manual_seed(11))
    full = run_steps([Step(request, 0, LENGTH)], page_size=16, scale=scale, gen=torch.Generator().manual_seed(11),
                     attention=split)[0]
    reference.assert_close(full, reference.attention(request, scale, window=window, softcap=softcap), dtype,
                           what=f"interpreted split attention, window {window}, softcap {softcap}")
    other = make_request(40, 2, 1, 16, dtype, torch.Generator().manual_seed(12), fill="nan")
    # chunks that end inside a segment, span a segment boundary, decode at the first key of a segment,
    # and the rest; then decode steps across the last boundary
    chunks = [(0, 20), (20, 63), (63, 64), (64, 96), (96, 97), (97, 100)]
    companions = [[], [Step(other, 0, 40)], [Step(other, 39, 40)], [Step(other, 10, 30)], [], [Step(other, 0, 5)]]
    return schedule_failures(request, chunks, companions, [0, 1, 0, 1, 0, 1], page_size=16, scale=scale, seed=11,
                             poison="nan", attention=split)


# (window, softcap): full causal; windows below a tile, between a tile and a segment, past a
# segment (none a multiple of either); one with a softcap. The mixed schedules: full causal
# attention, without and with a softcap (windowed layers keep the pair).
CASES = ((0, 0.0), (7, 0.0), (20, 0.0), (45, 5.0))
MIXED_CASES = ((0, 0.0), (0, 5.0))


def split_schedule_check() -> dict:
    """{"failures": [...], "detail": str} of the accuracy and schedule checks (interpreter only)."""
    from tests.kernels.interpreter_checks import in_workers

    calls = [(w, c, False) for w, c in CASES] + [(w, c, True) for w, c in MIXED_CASES]
    failures = []
    for (w, c, mixed), found in zip(calls, in_workers(_schedule_failures, calls)):
        where = f"mixed, softcap {c}" if mixed else f"window {w}, softcap {c}"
        failures += [f"{where}: {f}" for f in found]
    return {"failures": failures, "detail": f"6 steps of a {LENGTH}-token request over {-(-LENGTH // SEG)} segments "
                                            f"for (window, softcap) in {CASES} with the pair, and in {MIXED_CASES} "
                                            "mixed with the one-kernel form: accurate, bitwise equal to its prefill"}


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
