"""Export an evaluation as JSON or SARIF 2.1.0 (failing, stale and missing obligations).

SARIF rule ids are stable (documented in ``docs/status-rules.md``); each result carries a
partial fingerprint ``<case id>/<obligation id>`` so code-scanning tools track it across runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from assurance.evaluation import Evaluation, NodeResult

__all__ = ["SARIF_RULES", "to_sarif", "tool_version"]

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"

# (rule id, name, obligation/solution status, level, description)
SARIF_RULES = (
    ("BC001", "failed-obligation", "failed", "error",
     "Failing evidence (a defeater) exists for the obligation under the deployment configuration."),
    ("BC002", "stale-obligation", "stale", "warning",
     "The obligation's evidence is stale: a covered subject changed, or it exists only under another configuration."),
    ("BC003", "missing-obligation", "missing", "warning",
     "No evidence under the deployment configuration discharges the obligation."),
    ("BC004", "unreviewed-trusted-item", "trusted-unreviewed", "note",
     "A trusted item the case rests on has no accepted, current review."),
)
_BY_STATUS = {status: (index, rule_id, level) for index, (rule_id, _n, status, level, _d) in enumerate(SARIF_RULES)}


def tool_version() -> str:
    """The installed bitcase version (``0+unknown`` when not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bitcase")
    except PackageNotFoundError:
        return "0+unknown"


def _uri(path: Path | None) -> str:
    if path is None:
        return "case.toml"
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _result(evaluation: Evaluation, node: NodeResult, obligation: str, status: str, reasons: list[str]) -> dict[str, Any]:
    index, rule_id, level = _BY_STATUS[status]
    location: dict[str, Any] = {"artifactLocation": {"uri": _uri(evaluation.case.path)}}
    if node.line:
        location["region"] = {"startLine": node.line}
    text = f"{obligation} ({node.id}) is {status} under deployment {evaluation.deployment_digest}"
    if reasons:
        text += ": " + "; ".join(reasons[:3])
    return {
        "ruleId": rule_id, "ruleIndex": index, "level": level, "message": {"text": text},
        "locations": [{"physicalLocation": location,
                       "logicalLocations": [{"name": node.id, "kind": "member",
                                             "fullyQualifiedName": f"{evaluation.case.id}/{node.id}/{obligation}"}]}],
        "partialFingerprints": {"bitcaseObligation/v1": f"{evaluation.case.id}/{obligation}"},
        "properties": {"node": node.id, "obligation": obligation, "status": status,
                       "evidence_ids": [c.evidence_id for c in node.counterexamples if c.obligation == obligation]
                       or list(node.stale_evidence_ids)},
    }


def to_sarif(evaluation: Evaluation) -> dict[str, Any]:
    """A SARIF 2.1.0 log with one result per failing, stale or missing obligation (and unreviewed trust)."""
    results = []
    for node in evaluation.nodes.values():
        if node.kind != "solution":
            continue
        if node.status == "trusted-unreviewed":
            state = node.review.state if node.review else "unreviewed"
            results.append(_result(evaluation, node, node.obligations[0].id if node.obligations else node.id,
                                   node.status, [f"review is {state}"]))
            continue
        for ob in node.obligations:
            if ob.status in ("failed", "stale", "missing"):
                results.append(_result(evaluation, node, ob.id, ob.status, list(ob.reasons)))
    rules = [{"id": rule_id, "name": name, "shortDescription": {"text": desc},
              "defaultConfiguration": {"level": level}}
             for rule_id, name, _status, level, desc in SARIF_RULES]
    top = evaluation.node(evaluation.top)
    return {
        "$schema": SARIF_SCHEMA, "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "bitcase", "version": tool_version(), "rules": rules}},
            "automationDetails": {"id": f"bitcase/status/{evaluation.case.id}/{evaluation.deployment_digest}"},
            "results": results,
            "properties": {"case": evaluation.case.id, "deployment_digest": evaluation.deployment_digest,
                           "top": evaluation.top, "top_status": top.status},
        }],
    }
