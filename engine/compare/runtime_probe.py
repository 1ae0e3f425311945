"""Observations the runtime configuration checks judge: one short engine run under D, recorded.

The probe starts an engine of D (refusing to start unless its own recomputed D equals the expected
digest), runs a prefill long enough to be chunked, decodes, and re-submits a prefix so a cache hit
happens, all inside ``record_launches()``. It also provokes the two refusals the checks rely on:
a launch outside the sealed plan and an engine started against a different D, and, as the
positive control of the run-time finiteness check, turns one cached K/V row of a running
request into NaN between two steps: with the check on, that request must end with finish reason
"error" while its companion runs to its length.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from engine.compare.prompts import prompt_ids
from engine.config import EngineConfig
from evidence_db.bundle import Deployment

__all__ = ["ProbeResult", "probe_engine", "observed_environment"]


@dataclass(slots=True)
class ProbeResult:
    """What the probe saw."""

    engine_deployment: Deployment
    plan_digest: str
    plan_keys: tuple[str, ...]
    plan_configs: dict[str, dict[str, Any]]
    launches: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)  # (kernel, key, options)
    torch_num_threads: int = 0
    cached_tokens: int = 0
    prefill_chunk_ends: tuple[int, ...] = ()
    outside_plan_refused: str | None = None  # the refusal message, None if the launch was admitted
    wrong_deployment_refused: str | None = None
    finiteness_control: dict[str, Any] = field(default_factory=dict)  # finish reasons of the NaN control
    num_flagged: int = 0  # requests of the plain probe runs the finiteness check ended


def observed_environment(device: str) -> dict[str, Any]:
    """Versions and accelerator, derived here independently of ``engine/deployment.py``."""
    observed: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__}
    try:
        observed["triton"] = metadata.version("triton")
    except metadata.PackageNotFoundError:
        observed["triton"] = "not installed"
    if device.startswith("cuda"):
        index = torch.device(device).index or 0
        observed["accelerator"] = torch.cuda.get_device_name(index)
        observed["cuda"] = torch.version.cuda
        major, minor = torch.cuda.get_device_capability(index)
        observed["compute_capability"] = f"{major}.{minor}"
    else:
        observed["accelerator"] = "cpu"
    return observed


def _refuse_outside_plan(plan) -> str | None:
    from kernels.launch import PlanViolation, require, use_plan

    entry = next(e for e in plan.entries if e.kernel == "matmul")
    config = entry.config()
    doubled = tuple((n, v * 2 if n == "BLOCK_K" else v) for n, v in config.constexprs)
    try:
        with use_plan(plan):
            require(replace(config, constexprs=doubled))
    except PlanViolation as exc:
        return str(exc)
    return None


def _finiteness_control(engine, params) -> dict[str, Any]:
    """Poison the K/V of position 0 of one running request (layer 0) after its prefill; finish both."""
    engine.add_request(list(prompt_ids(0, "runtime.nan", 5, engine.spec.vocab_size)), params, request_id="nan-control")
    engine.add_request(list(prompt_ids(0, "runtime.nan.companion", 5, engine.spec.vocab_size)), params,
                       request_id="nan-companion")
    engine.step()  # both prefill; the next step's attention reads position 0 again
    seq = next(s for s in engine.scheduler.running if s.request_id == "nan-control")
    engine.runner.kv.k[0, seq.page_table[0], 0] = float("nan")
    engine.runner.kv.v[0, seq.page_table[0], 0] = float("nan")
    outputs = {o.request_id: o.finish_reason for o in engine.run()}
    return {"poisoned": outputs.get("nan-control"), "companion": outputs.get("nan-companion"),
            "num_events": len(engine.nonfinite_events)}


def probe_engine(model_dir: Path, config: EngineConfig, expected: Deployment) -> ProbeResult:
    """Run the probe under ``config``; the engine refuses to start unless it computes ``expected``."""
    from engine.deployment import DeploymentMismatch
    from engine.llm_engine import LLMEngine
    from engine.sampling_params import SamplingParams
    from kernels.launch import record_launches

    engine = LLMEngine(model_dir, config, expected_deployment=expected.digest)
    plan = engine.runner.plan
    result = ProbeResult(engine.deployment, plan.digest, plan.keys(),
                         {e.key: e.config().launch_options() for e in plan.entries},
                         torch_num_threads=torch.get_num_threads())
    length = min(config.max_model_len - 4, config.max_num_batched_tokens + config.page_size + 1)
    first = list(prompt_ids(0, "runtime.probe", length, engine.spec.vocab_size))
    again = first[:2 * config.page_size] + list(prompt_ids(0, "runtime.probe.suffix", 5, engine.spec.vocab_size))
    params = SamplingParams(max_tokens=3, ignore_eos=True)
    with record_launches() as launches:
        engine.add_request(first, params)
        outputs = engine.run()
        engine.add_request(again, params)
        outputs += engine.run()
    result.launches = [(r.kernel, r.key, dict(r.config)) for r in launches]
    result.prefill_chunk_ends = outputs[0].prefill_chunk_ends
    result.cached_tokens = outputs[1].num_cached_tokens
    result.num_flagged = len(engine.nonfinite_events)
    result.finiteness_control = _finiteness_control(engine, params)
    result.outside_plan_refused = _refuse_outside_plan(plan)
    wrong = "sha256:" + "0" * 64
    try:
        LLMEngine(model_dir, config, expected_deployment=wrong)
    except DeploymentMismatch as exc:
        result.wrong_deployment_refused = str(exc)
    return result
