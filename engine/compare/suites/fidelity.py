"""Semantic fidelity (a separate claim, never determinism evidence): engine logits vs an independent reference.

Six prompts each produce four greedy positions in one engine of D; every produced row is compared
with an independent implementation of the same checkpoint: on CUDA, Hugging Face transformers'
model class for it (``LlamaForCausalLM``, ``Qwen3ForCausalLM``, ``Gemma3ForCausalLM``, ...) in float32
when transformers is importable; otherwise (and always on CPU) the float64 torch reference
``engine/reference.py`` (Gemma3's in ``engine/gemma_reference.py``). A prompt passes when

* the largest |engine - reference| over its rows and the whole vocabulary is at most
  ``TOLERANCE[dtype] * max(1, largest |reference logit|)`` (the stated tolerance, scaled to the
  logits' magnitude so it means the same for random and trained checkpoints), and
* each greedy token equals the reference's argmax wherever the reference's top two logits are
  separated by more than twice the tolerance (closer calls are not decided by a tolerance claim).
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

import torch

from engine.compare.context import SuiteContext
from engine.compare.outcomes import ComparisonOutcome, UnitOutcome
from engine.compare.prompts import prompt_ids
from engine.compare.scales import ScaleSpec
from engine.compare.units import ComparisonSpec, RequestSpec, Unit
from engine.sampling_params import SamplingParams

__all__ = ["plan", "run", "TOLERANCE", "NUM_POSITIONS"]

# Relative tolerance by serving dtype. Measured on the tiny preset (ci prompts): float32 differs by
# about 1e-7 and bfloat16 by about 4e-3; the margins leave room for longer prompts and deeper models.
TOLERANCE = {"float32": 1e-4, "bfloat16": 5e-2}
NUM_POSITIONS = 4


def plan(scale: ScaleSpec, vocab_size: int, seed: int) -> list[Unit]:
    """One unit of six comparisons (one per prompt)."""
    requests = {f"f{i}": RequestSpec(f"f{i}", prompt_ids(seed, f"fidelity.f{i}", n, vocab_size),
                                     SamplingParams(max_tokens=NUM_POSITIONS, ignore_eos=True))
                for i, n in enumerate(scale.fidelity_prompt_lengths)}
    comparisons = tuple(ComparisonSpec(f"fidelity.{label}", label, "independent-reference") for label in requests)
    cost = 8 * sum(len(r.prompt) for r in requests.values())
    return [Unit("fidelity.reference", "fidelity", comparisons, plan=None, cost=cost, requests=requests)]


def _reference(ctx: SuiteContext) -> tuple[str, Callable[[Sequence[int]], torch.Tensor]]:
    """(description, function: token ids -> [T, V] float64 logits on the CPU)."""
    if ctx.device.startswith("cuda"):
        try:
            from transformers import AutoModelForCausalLM
        except ImportError:
            pass
        else:
            model = AutoModelForCausalLM.from_pretrained(ctx.model_dir, torch_dtype=torch.float32)
            model = model.to(ctx.device).eval()

            @torch.no_grad()
            def hf_logits(ids: Sequence[int]) -> torch.Tensor:
                x = torch.tensor([list(ids)], device=ctx.device)
                return model(x).logits[0].double().cpu()
            return f"transformers {type(model).__name__} (float32, CUDA)", hf_logits
    from engine.reference import ReferenceModel

    return "engine/reference.py (float64, CPU)", ReferenceModel(ctx.model_dir).logits


def _judge(spec: ComparisonSpec, label: str, got: torch.Tensor, tokens: Sequence[int], expected: torch.Tensor,
           relative_tolerance: float) -> ComparisonOutcome:
    # got, expected: [N, V] float64
    tolerance = relative_tolerance * max(1.0, float(expected.abs().max()))
    diff = (got - expected).abs()
    worst = float(diff.max())
    top2 = expected.topk(2, dim=-1).values
    clear = (top2[:, 0] - top2[:, 1]) > 2 * tolerance
    argmax = expected.argmax(-1)
    disagree = [i for i in range(len(tokens)) if bool(clear[i]) and tokens[i] != int(argmax[i])]
    problems = []
    if worst > tolerance:
        row = int(diff.max(dim=1).values.argmax())
        problems.append(f"largest |engine - reference| {worst:.3g} exceeds the tolerance {tolerance:g} "
                        f"(position {row}, element {int(diff[row].argmax())})")
    if disagree:
        problems.append(f"greedy token differs from the reference argmax at clear positions {disagree}")
    measure = {"max_abs_difference": worst, "tolerance": tolerance, "relative_tolerance": relative_tolerance,
               "num_positions": len(tokens),
               "argmax_agreement": sum(int(t) == int(a) for t, a in zip(tokens, argmax)),
               "reference_max_abs_logit": float(expected.abs().max())}
    return ComparisonOutcome(spec.comparison_id, label, "fail" if problems else "pass", None, tuple(problems),
                             {"fidelity": measure})


def run(unit: Unit, ctx: SuiteContext) -> UnitOutcome:
    """Generate in one engine of D, compute the reference rows, judge each prompt within the tolerance."""
    start = time.perf_counter()
    handle = ctx.open_engine()
    try:
        result = handle.run(list(unit.requests.values()))
        dtype = handle.config["serving_dtype"]
    finally:
        handle.close()
    description, reference = _reference(ctx)
    tolerance = TOLERANCE[dtype]
    outcomes = []
    for spec in unit.comparisons:
        request, run_ = unit.requests[spec.candidate], result.requests[spec.candidate]
        history = list(request.prompt) + list(run_.trace.tokens)
        n = len(request.prompt)
        expected = reference(history)[n - 1:n - 1 + len(run_.trace)]
        outcomes.append(_judge(spec, request.label, run_.trace.logits.double(), run_.trace.tokens, expected, tolerance))
        ctx.note(f"{unit.unit_id}: {spec.comparison_id}")
    return UnitOutcome(unit, outcomes, seconds=time.perf_counter() - start,
                       run_witnesses={"reference": description, "serving_dtype": dtype,
                                      "relative_tolerance": tolerance},
                       engine_configs={"candidate": dict(ctx.engine_config())})
