"""Probe results as ``test_result`` evidence under an external deployment configuration D.

D names what the probe can know from outside: the endpoint as given (no credentials), the API
flavour, the model id, the ``system_fingerprint`` values seen, the server's version, what was
found about its features, and whatever ``--deployment`` declares (flags the server does not
report). What the server says about itself beyond its version varies from call to call on some
servers (load, throughput), so it goes into each record's details, not into D.
"""

from __future__ import annotations

import socket
from dataclasses import asdict
from typing import Any, Sequence

from evidence_db.bundle import Deployment, EvidenceRecord, Producer, Subject
from evidence_db.canonical import digest_of

from probing.backend import Backend
from probing.scenario_base import Scenario, UnitResult

__all__ = ["BLACK_BOX", "external_deployment", "unit_records", "run_id_of", "producer_for"]

BLACK_BOX = ("test evidence about a black box: an engine seen only through its HTTP API; no kernel proofs or "
             "runtime checks are visible from outside")
_VERDICT = {"pass": "a match is evidence at this resolution only",
            "fail": "a conclusive counterexample for this server, configuration and model",
            "inconclusive": "no evidence either way"}


def external_deployment(*, endpoint: str, model: str, backend: Backend, fingerprints: Sequence[str],
                        declared: dict[str, Any]) -> Deployment:
    """The external D the probe's evidence is recorded under."""
    features = {k: v for k, v in asdict(backend.features).items() if k != "max_model_len"}
    return Deployment(fields={
        "kind": "external",
        "black_box": BLACK_BOX,
        "endpoint": endpoint,
        "api": backend.api,
        "model": model,
        "system_fingerprint": sorted(set(fingerprints)),
        "server_version": backend.version,
        "max_model_len": backend.features.max_model_len,
        "probe_features": {**features, "prefix_cache_bypass": backend.isolation},
        "declared": declared,
    })


def run_id_of(deployment: Deployment, started_at: str, seed: int) -> str:
    """A short id naming one probe run (record ids and the evidence-set key)."""
    return digest_of({"deployment": deployment.digest, "started_at": started_at, "seed": seed})[7:23]


def unit_records(*, scenario: Scenario, results: Sequence[UnitResult], owed: Sequence[str], deployment: Deployment,
                 producer: Producer, run_id: str, resolution: str, run_details: dict[str, Any]) -> list[EvidenceRecord]:
    """One record per unit; together they are one evidence set (every owed unit must pass)."""
    records = []
    for r in results:
        details: dict[str, Any] = {
            "suite": scenario.name, "unit": r.unit, "run_key": f"probe:{run_id}:{scenario.name}",
            "suite_units": list(owed), "logical_key": f"probe:{deployment.digest}:{scenario.name}:{r.unit}",
            "resolution": resolution, "evidence_kind": BLACK_BOX, "witness": r.witness,
            "num_comparisons": r.num_comparisons, "num_passed": r.num_comparisons - r.num_failed,
            "num_failed": r.num_failed, "errors": list(r.errors), **run_details}
        if r.difference is not None:
            details["counterexample"] = r.difference.to_json()
            details["first_differing_position"] = r.difference.step
            details["largest_difference"] = details["counterexample"]["largest_difference"]
        compared = f"compared: {resolution}" if r.status != "inconclusive" else ""
        summary = "; ".join(s for s in (f"{scenario.title} [{r.unit}]: {r.summary}", compared, _VERDICT[r.status]) if s)
        records.append(EvidenceRecord(
            id=f"probe:{run_id}:{scenario.name}:{r.unit}", category="test_result", obligation=scenario.obligation,
            status=r.status, summary=summary, producer=producer, deployment=deployment,
            subjects=(Subject(f"deployment:{deployment.digest}", deployment.digest),), details=details))
    return records


def producer_for(*, version: str, command: Sequence[str], started_at: str, finished_at: str) -> Producer:
    """The producer block of every record of one run."""
    return Producer(tool="bitcase probe", version=version, command=" ".join(command), host=socket.gethostname(),
                    accelerator="external", started_at=started_at, finished_at=finished_at)
