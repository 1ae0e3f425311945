"""Carry kernel proofs over to a new deployment configuration when nothing they depend on changed.

A kernel proof depends on the kernel's source, its contract, its sealed configuration and the
verifier and Triton versions, not on the rest of D. Editing one kernel changes the plan digest
and so D; the proofs of the other kernels are then re-issued under the new D, each naming the
record it was carried from, and only the edited kernel is verified again.
"""

from __future__ import annotations

from typing import Any, Iterable

from evidence_db.bundle import Deployment, EvidenceRecord, Producer, Subject

__all__ = ["carry_proofs"]


def _matches(old: Any, target: Any, current: dict[str, str], versions: tuple[str, str]) -> bool:
    d = old.details
    return (old.category == "kernel_proof" and old.status == "pass" and d.get("verdict") == "VERIFIED"
            and d.get("key") == target.key and d.get("source_digest") == target.source_digest
            and (d.get("triton_version"), d.get("verifier_version")) == versions
            and bool(old.subjects) and all(current.get(s.uri) == s.sha256 for s in old.subjects))


def carry_proofs(*, evidence: Iterable[Any], targets: Iterable[Any], deployment: Deployment,
                 producer: Producer) -> tuple[list[EvidenceRecord], list[str]]:
    """Records re-issuing fresh passing proofs under ``deployment``, and the keys still to verify.

    ``evidence`` are stored views (any D, with details); ``targets`` the plan entries wanted now.
    """
    from assurance.subjects import project_root
    from evidence_db.canonical import file_digest
    from proofs import VERIFIER_VERSION
    from proofs.producer import package_version

    root = project_root()
    versions = (package_version("triton"), VERIFIER_VERSION)
    latest: dict[str, Any] = {}
    for view in evidence:  # chain order: the newest proof of a key wins
        if view.category == "kernel_proof" and view.deployment_digest != deployment.digest:
            latest[view.details.get("key", "")] = view
    carried, remaining = [], []
    for target in targets:
        old = latest.get(target.key)
        current = {}
        for s in (old.subjects if old else ()):
            path = root / s.uri.removeprefix("code:")
            current[s.uri] = file_digest(path) if s.uri.startswith("code:") and path.is_file() else ""
        if old is None or not _matches(old, target, current, versions):
            remaining.append(target.key)
            continue
        details = {**old.details, "carried_from": {"record": old.item_id, "deployment": old.deployment_digest}}
        carried.append(EvidenceRecord(
            id=f"{old.item_id}:carried:{deployment.digest.removeprefix('sha256:')[:16]}", category="kernel_proof",
            obligation=old.obligation, status="pass", summary=old.summary + " (carried over: kernel, contract, "
            "configuration and verifier unchanged)", producer=producer, deployment=deployment,
            subjects=tuple(Subject(s.uri, s.sha256) for s in old.subjects), details=details))
    return carried, remaining
