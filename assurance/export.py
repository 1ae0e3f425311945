"""Export an evaluation as JSON or SARIF 2.1.0 (failing, stale and missing obligations).

SARIF rule ids are stable (documented in ``docs/status-rules.md``); each result carries a
partial fingerprint ``<case id>/<obligation id>`` so code-scanning tools track it across runs.
Artifact URIs are relative to the case's subject root (``uriBaseId`` ``PROJECTROOT``): a
result points at the failing test's source where its evidence says (JUnit ``file``/``line``,
or for xunit2 the module its ``classname`` names, when that file exists), with the case node
as a related location; otherwise at the case node.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from assurance.evaluation import Counterexample, Evaluation, NodeResult
from assurance.subjects import subject_root

__all__ = ["SARIF_RULES", "to_sarif", "tool_version"]

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"

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


ROOT_BASE = "PROJECTROOT"


def _artifact(path: Path, root: Path) -> dict[str, str]:
    """A SARIF artifactLocation: relative to the root when inside it, else an absolute file URI."""
    path = path if path.is_absolute() else root / path
    try:
        return {"uri": path.resolve().relative_to(root).as_posix(), "uriBaseId": ROOT_BASE}
    except ValueError:
        return {"uri": path.resolve().as_uri()}


def _physical(path: Path, root: Path, line: int | None) -> dict[str, Any]:
    location: dict[str, Any] = {"artifactLocation": _artifact(path, root)}
    if line:
        location["region"] = {"startLine": line}
    return location


def _evidence_source(cex: Counterexample, root: Path) -> dict[str, Any] | None:
    """Where the failing evidence's producer says the failure is, when it says and the file exists."""
    junit = cex.details.get("junit") if isinstance(cex.details, dict) else None
    if not isinstance(junit, dict):
        return None
    file, line = junit.get("file"), junit.get("line")
    if not isinstance(file, str) or not file:
        classname = junit.get("classname")  # xunit2 has no file: the test module's dotted name
        file = classname.replace(".", "/") + ".py" if isinstance(classname, str) and classname else None
        line = None
    if file is None or not (root / file).is_file():
        return None
    try:
        number = int(line) if line not in (None, "") else None
    except (TypeError, ValueError):
        number = None
    if number is not None and junit.get("suite") == "pytest":
        number += 1  # pytest writes 0-based lines
    return _physical(Path(file), root, number if number is not None and number > 0 else None)


def _result(evaluation: Evaluation, node: NodeResult, obligation: str, status: str, reasons: list[str],
            root: Path) -> dict[str, Any]:
    index, rule_id, level = _BY_STATUS[status]
    case_location = _physical(evaluation.case.path or root / "case.toml", root, node.line)
    logical = [{"name": node.id, "kind": "member",
                "fullyQualifiedName": f"{evaluation.case.id}/{node.id}/{obligation}"}]
    sources = [s for c in node.counterexamples if c.obligation == obligation if (s := _evidence_source(c, root))]
    text = f"{obligation} ({node.id}) is {status} under deployment {evaluation.deployment_digest}"
    if reasons:
        text += ": " + "; ".join(reasons[:3])
    result: dict[str, Any] = {
        "ruleId": rule_id, "ruleIndex": index, "level": level, "message": {"text": text},
        "locations": [{"physicalLocation": sources[0] if sources else case_location, "logicalLocations": logical}],
    }
    if sources:
        related = [case_location] + sources[1:]
        result["relatedLocations"] = [
            {"id": i, "physicalLocation": loc,
             "message": {"text": f"case node {node.id}" if i == 0 else "other failing evidence"}}
            for i, loc in enumerate(related)]
    return result | {
        "partialFingerprints": {"bitcaseObligation/v1": f"{evaluation.case.id}/{obligation}"},
        "properties": {"node": node.id, "obligation": obligation, "status": status,
                       "evidence_ids": [c.evidence_id for c in node.counterexamples if c.obligation == obligation]
                       or list(node.stale_evidence_ids)},
    }


def to_sarif(evaluation: Evaluation) -> dict[str, Any]:
    """A SARIF 2.1.0 log with one result per failing, stale or missing obligation (and unreviewed trust)."""
    root = subject_root(evaluation.case).resolve()
    results = []
    for node in evaluation.nodes.values():
        if node.kind != "solution":
            continue
        if node.status == "trusted-unreviewed":
            state = node.review.state if node.review else "unreviewed"
            results.append(_result(evaluation, node, node.obligations[0].id if node.obligations else node.id,
                                   node.status, [f"review is {state}"], root))
            continue
        for ob in node.obligations:
            if ob.status in ("failed", "stale", "missing"):
                results.append(_result(evaluation, node, ob.id, ob.status, list(ob.reasons), root))
    rules = [{"id": rule_id, "name": name, "shortDescription": {"text": desc},
              "defaultConfiguration": {"level": level}}
             for rule_id, name, _status, level, desc in SARIF_RULES]
    top = evaluation.node(evaluation.top)
    return {
        "$schema": SARIF_SCHEMA, "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "bitcase", "version": tool_version(), "rules": rules}},
            "originalUriBaseIds": {ROOT_BASE: {"uri": root.as_uri() + "/",
                                               "description": {"text": "the case's subject root"}}},
            "automationDetails": {"id": f"bitcase/status/{evaluation.case.id}/{evaluation.deployment_digest}"},
            "results": results,
            "properties": {"case": evaluation.case.id, "deployment_digest": evaluation.deployment_digest,
                           "top": evaluation.top, "top_status": top.status},
        }],
    }
