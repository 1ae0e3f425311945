"""Runtime configuration checks, emitted as ``runtime_config_check`` evidence.

* ``runtime.plan``: the sealed plan recomputed here from the checkpoint's shape has the digest D
  names and the engine activated; every launch recorded during a probe run (chunked prefill,
  decode, a prefix hit) is an entry of that plan with exactly its launch options; the recording
  saw every kernel of the forward path; and a launch outside the plan is refused.
* ``runtime.no_autotune``: no Triton autotuner or heuristics in ``kernels/`` or ``engine/``
  (static scan) and none among the loaded kernel modules' objects.
* ``runtime.deployment``: the engine started only because its own recomputed D equals the
  expected D, it refuses a different D, and versions, accelerator and thread count observed here
  independently equal D's fields.
* ``trusted.attention-finiteness`` (only under a D whose engine field ``check_finite`` is on):
  every rope_store_kv and attention-combine launch of the probe ran with the finiteness check
  (CHECK = 1), and the check ended a request whose cached K/V row was made NaN while its
  companion ran on. Under such a D every step of every run checks the premise
  (kernels/finiteness.py), so this discharges the trusted item as runtime-checked.

These are checks of one run, never proofs. Record ids carry the run's start time: every execution
is its own event, so a later pass never hides an earlier failure.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from engine.compare.autotune_scan import probe_modules, scan_sources
from engine.compare.identity import REPO_ROOT, RunIdentity
from engine.compare.protocol import FINITENESS_OBLIGATION
from engine.compare.runtime_probe import ProbeResult, observed_environment
from evidence_db.bundle import EvidenceRecord

__all__ = ["plan_check", "autotune_check", "deployment_check", "finiteness_check", "check_records",
           "FINITENESS_OBLIGATION", "KERNELS_ON_PATH", "ATTENTION_FORMS"]

# What a passing finiteness record says (kernels/finiteness.py has the argument).
FINITENESS_COVERS = ("every K/V row rope_store_kv writes is finite (so every K/V row attention reads: each was written "
                     "and flagged by a step of its request, or published by an unflagged step)",
                     "the running max of every merged segment, the merged sum and the output of every (token, head) "
                     "are finite (so a q row is finite and no score, sum or accumulator overflowed)")
FINITENESS_TRUSTED = ("IEEE 754 propagation of inf and NaN by the device's float operations",
                      "the flagging code computes what kernels/finiteness.py says (tests, not proofs)",
                      "values attention does not read: other kernels' arithmetic")

KERNELS_ON_PATH = ("embedding", "rms_norm", "matmul", "rope_store_kv")
# Attention runs as the pair or in one kernel, a choice of speed per launch (kernels/ops.py): a
# recording covers attention when it holds either form.
ATTENTION_FORMS = (("paged_attention", "attention_combine"), ("attention_prefill",))
# Kernels a family's plan holds in place of or beside those (Gemma3's GeGLU, its logit softcap): on
# the path whenever the plan has an entry of them.
FAMILY_KERNELS = ("gelu_tanh_mul", "logit_softcap")


def plan_check(probe: ProbeResult, recomputed_digest: str, d_fields: dict[str, Any]) -> tuple[str, list[str], dict]:
    """(status, problems, details) of ``runtime.plan``."""
    problems = []
    d_digest = d_fields.get("kernel_plan", {}).get("digest")
    if not recomputed_digest == d_digest == probe.plan_digest:
        problems.append(f"plan digests differ: recomputed {recomputed_digest}, D {d_digest}, engine {probe.plan_digest}")
    outside = [(k, key) for k, key, _ in probe.launches if key not in probe.plan_configs]
    if outside:
        problems.append(f"{len(outside)} launch(es) outside the plan, first {outside[0]}")
    changed = [key for _, key, opts in probe.launches if key in probe.plan_configs and opts != probe.plan_configs[key]]
    if changed:
        problems.append(f"launch options differ from the plan for {sorted(set(changed))}")
    planned = {key.split(".")[0] for key in probe.plan_keys}
    # The MLP's activation: the gate/up projection with SiLU in its epilogue where planned, else the
    # plan's separate activation kernel; family kernels whenever planned
    activation = next((k for k in ("matmul_silu", "gelu_tanh_mul") if k in planned), "silu_mul")
    required = set(KERNELS_ON_PATH) | {activation} | (set(FAMILY_KERNELS) & planned)
    launched = {k for k, _, _ in probe.launches}
    missing = sorted(required - launched)
    if not any(set(form) <= launched for form in ATTENTION_FORMS):
        missing.append(" + ".join(ATTENTION_FORMS[0]) + " or " + " + ".join(ATTENTION_FORMS[1]))
    if missing:
        problems.append(f"no launch of {missing} was recorded: the recording does not cover the forward path")
    if probe.outside_plan_refused is None:
        problems.append("a launch outside the sealed plan was admitted")
    if len(probe.prefill_chunk_ends) < 2 or probe.cached_tokens <= 0:
        problems.append(f"the probe did not exercise chunking and reuse (chunk ends {list(probe.prefill_chunk_ends)}, "
                        f"cached tokens {probe.cached_tokens})")
    used = Counter(key for _, key, _ in probe.launches)
    details = {"plan_digest": recomputed_digest, "num_launches": len(probe.launches), "launches_per_key": dict(used),
               "unused_entries": sorted(set(probe.plan_keys) - set(used)), "refusal": probe.outside_plan_refused,
               "probe": {"prefill_chunk_ends": list(probe.prefill_chunk_ends), "cached_tokens": probe.cached_tokens}}
    return ("fail" if problems else "pass"), problems, details


def autotune_check(root: Path = REPO_ROOT) -> tuple[str, list[str], dict]:
    """(status, problems, details) of ``runtime.no_autotune``."""
    from kernels.plan import KERNEL_SOURCES

    findings, num_files = scan_sources(root)
    modules = tuple(sorted({module for module, _, _ in KERNEL_SOURCES.values()}))
    loaded = probe_modules(modules)
    problems = [str(f) for f in findings] + loaded
    details = {"num_files_scanned": num_files, "scanned": ["kernels/", "engine/"], "modules_probed": list(modules),
               "findings": problems}
    return ("fail" if problems else "pass"), problems, details


def deployment_check(probe: ProbeResult | None, d_fields: dict[str, Any], d_digest: str, device: str,
                     startup_error: str | None) -> tuple[str, list[str], dict]:
    """(status, problems, details) of ``runtime.deployment``."""
    observed = observed_environment(device)
    software, accelerator = d_fields.get("software", {}), d_fields.get("accelerator", {})
    expected = {"python": software.get("python"), "torch": software.get("torch"), "triton": software.get("triton"),
                "accelerator": accelerator.get("name")}
    if device.startswith("cuda"):
        expected.update(cuda=accelerator.get("cuda"), compute_capability=accelerator.get("compute_capability"))
    fields = {name: {"D": expected[name], "observed": observed.get(name)} for name in expected}
    problems = [f"{name}: D says {v['D']!r}, observed {v['observed']!r}" for name, v in fields.items()
                if v["D"] != v["observed"]]
    if startup_error:
        problems.insert(0, f"the engine refused to start under D: {startup_error}")
    if probe is not None:
        fields["torch_num_threads"] = {"D": d_fields.get("torch_num_threads"), "observed": probe.torch_num_threads}
        if probe.torch_num_threads != d_fields.get("torch_num_threads"):
            problems.append(f"thread count: D says {d_fields.get('torch_num_threads')}, the engine runs "
                            f"{probe.torch_num_threads}")
        if probe.engine_deployment.digest != d_digest:
            problems.append(f"the engine computes D {probe.engine_deployment.digest}, not {d_digest}")
        if probe.wrong_deployment_refused is None:
            problems.append("the engine started under a deployment digest it does not match")
    details = {"fields": fields, "engine_startup": startup_error or "started under the expected D",
               "refusal": None if probe is None else probe.wrong_deployment_refused}
    return ("fail" if problems else "pass"), problems, details


def finiteness_check(probe: ProbeResult, d_fields: dict[str, Any]) -> tuple[str, list[str], dict]:
    """(status, problems, details) of ``trusted.attention-finiteness`` under a D with the check on."""
    problems = []
    if d_fields.get("engine", {}).get("check_finite") is not True:
        problems.append("D does not say the run-time finiteness check is on")
    checks = {key: opts.get("CHECK") for kernel, key, opts in probe.launches
              if kernel in ("rope_store_kv", "attention_combine", "attention_prefill")}
    if not checks:
        problems.append("no rope_store_kv or attention_combine launch was recorded")
    unchecked = sorted(key for key, value in checks.items() if value != 1)
    if unchecked:
        problems.append(f"launches without the check: {unchecked}")
    control = probe.finiteness_control
    if control.get("poisoned") != "error":
        problems.append(f"a request whose cached K/V row was NaN finished {control.get('poisoned')!r}, not 'error'")
    if control.get("companion") != "length":
        problems.append(f"the control's companion finished {control.get('companion')!r}, not 'length'")
    details = {"checked_keys": sorted(checks), "control": control, "num_flagged_in_probe": probe.num_flagged,
               "covers": list(FINITENESS_COVERS), "stays_trusted": list(FINITENESS_TRUSTED)}
    return ("fail" if problems else "pass"), problems, details


def check_records(identity: RunIdentity, results: dict[str, tuple[str, list[str], dict]], source: str) -> list[EvidenceRecord]:
    """One ``runtime_config_check`` record per check, ids unique to this execution."""
    stamp = re.sub(r"[^0-9]", "", identity.producer.started_at)
    records = []
    for obligation, (status, problems, details) in results.items():
        verdict = "passed" if status == "pass" else f"{status}: " + "; ".join(problems)
        records.append(EvidenceRecord(
            id=f"{obligation}.{identity.key}.{stamp}", category="runtime_config_check", obligation=obligation,
            status=status, summary=f"{obligation} ({source}) {verdict}"[:2000], producer=identity.producer,
            deployment=identity.deployment, subjects=identity.subjects,
            details={"source": source, "run_key": identity.key, "problems": problems, **details}))
    return records
