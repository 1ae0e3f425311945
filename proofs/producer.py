"""Kernel results as evidence records (bundle format v1).

Each (kernel, configuration) becomes one ``kernel_proof`` item with obligation
``kernel.<plan entry key>.contract`` (the case generates one per sealed-plan entry): status
``pass`` for VERIFIED, ``fail`` for REFUTED (counterexample in ``details``), ``inconclusive``
for UNKNOWN and UNSUPPORTED. Each trusted assumption the results relied on becomes one
``trusted_contract_translation`` item with obligation ``trusted.<assumption id>`` listing the
entries that rely on it (host glue lists the premises no wrapper check establishes). Record
ids carry a run tag so every run adds items; ``details.logical_key`` is stable, so a newer run
supersedes an older one (status rule R2).
"""

from __future__ import annotations

import os
from importlib import metadata
from typing import Callable, Iterable

from evidence_db.bundle import Deployment, EvidenceRecord, Producer, Subject, utc_now
from evidence_db.canonical import digest_of, file_digest
from proofs import VERIFIER_VERSION
from proofs.planrun import REPO_ROOT, Target
from proofs.result import KernelResult

__all__ = ["verify_plan_records", "records_for", "minimal_deployment", "producer_info", "package_version"]


def package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def minimal_deployment(plan_name: str, plan_digest: str) -> Deployment:
    """The D used when none is given: the plan and the versions the proofs depend on."""
    return Deployment(fields={"kernel_plan": {"name": plan_name, "digest": plan_digest},
                              "software": {"triton": package_version("triton")},
                              "verifier": {"version": VERIFIER_VERSION}})


def producer_info(command: str, started_at: str) -> Producer:
    return Producer(tool="bitcase verify", version=package_version("bitcase"), command=command,
                    host=os.uname().nodename, accelerator="cpu", started_at=started_at, finished_at=utc_now())


def _subjects(r: KernelResult) -> tuple[Subject, ...]:
    out = [Subject(f"code:{r.source_file}", r.source_digest)]
    contract = REPO_ROOT / r.contract_file
    if r.contract_file and contract.is_file():
        out.append(Subject(f"code:{r.contract_file}", file_digest(contract)))
    return tuple(out)


def _summary(r: KernelResult) -> str:
    if r.verdict == "VERIFIED":
        return (f"{r.key}: selected-region invariance contract proved ({r.proved} obligations; relational, "
                "under stated premises and trusted assumptions, not numerical correctness)")
    return f"{r.key}: {r.verdict}: {r.reason}"[:2000]


def records_for(results: Iterable[KernelResult], deployment: Deployment, producer: Producer) -> list[EvidenceRecord]:
    """kernel_proof items for the results and trusted_contract_translation items for their trust."""
    results = list(results)
    tag = digest_of({"d": deployment.digest, "at": producer.started_at})[7:23]
    triton = package_version("triton")
    records, reliance, unchecked = [], {}, {}
    for r in results:
        details = {
            "logical_key": f"kernel_proof:{r.key}", "kernel": r.kernel, "key": r.key, "verdict": r.verdict,
            "reason": r.reason, "configuration": r.configuration, "source_file": r.source_file,
            "source_digest": r.source_digest, "contract_file": r.contract_file, "claim": r.claim,
            "triton_version": triton, "verifier_version": VERIFIER_VERSION, "obligations_proved": r.proved,
            "obligations_total": len(r.obligations), "seconds": round(r.seconds, 3), "demand": r.demand,
            "steps": r.steps, "premises": [{"text": p.text, "source": p.source, "checked": p.checked} for p in r.premises],
            "trusted": [t.id for t in r.trusted], "notes": r.notes,
        }
        if r.counterexample:
            details["counterexample"] = r.counterexample
        records.append(EvidenceRecord(id=f"kernel_proof:{r.key}:{tag}", category="kernel_proof",
                                      obligation=f"kernel.{r.key}.contract", status=r.evidence_status,
                                      summary=_summary(r), producer=producer, deployment=deployment,
                                      subjects=_subjects(r), details=details))
        if r.verdict != "VERIFIED":
            continue
        for t in r.trusted:
            reliance.setdefault(t.id, (t, []))[1].append(r.key)
        premises = [p.text for p in r.premises if p.checked == "trusted"]
        if premises:
            unchecked[r.key] = premises
    for ident, (assumption, keys) in sorted(reliance.items()):
        details = {"logical_key": f"trusted:{ident}", "assumption": ident, "title": assumption.title,
                   "rationale": assumption.rationale, "relied_on_by": sorted(keys),
                   "verifier_version": VERIFIER_VERSION}
        if ident == "host-glue":
            details["unchecked_premises"] = unchecked
        records.append(EvidenceRecord(
            id=f"trusted:{ident}:{tag}", category="trusted_contract_translation", obligation=f"trusted.{ident}",
            status="pass", summary=f"kernel proofs under D rely on: {assumption.title} ({len(keys)} entries)",
            producer=producer, deployment=deployment, details=details))
    return records


def verify_plan_records(*, deployment: Deployment, keys: Iterable[str] | None = None,
                        progress: Callable[[str, int, int], None] | None = None,
                        command: str = "bitcase verify", targets: list[Target] | None = None) -> list[EvidenceRecord]:
    """Verify the plan entries D names (or ``targets``), restricted to ``keys``, in proofs.planrun
    ``default_jobs`` worker processes; return records."""
    from proofs.errors import ContractError
    from proofs.planrun import default_jobs, targets_from_deployment, verify_targets

    started = utc_now()
    if targets is None:
        targets = targets_from_deployment(deployment.fields)
        if targets is None:
            from kernels.plan import preset_plan
            from proofs.planrun import targets_from_plan

            plan_fields = deployment.fields.get("kernel_plan") or {}
            plan = preset_plan(str(plan_fields.get("name")))
            if plan_fields.get("digest") not in (None, plan.digest):
                raise ContractError(f"deployment names plan {plan.name} with digest {plan_fields.get('digest')}, "
                                    f"but that plan's digest is {plan.digest} now")
            targets = targets_from_plan(plan)
    wanted = set(keys) if keys is not None else None
    targets = [t for t in targets if wanted is None or t.key in wanted]
    results = verify_targets(targets, progress=progress, jobs=default_jobs())
    return records_for(results, deployment, producer_info(command, started))
