"""Turn a :class:`ReportModel` into the values the report templates read.

Evidence text stays as it came: the environment's ``finalize`` hook cleans every ``{{ … }}``
output (:func:`assurance.render.safe.clean_text`) before autoescaping, and the row and
fragment functions clean and escape what they build; JSON for the script is cleaned here.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from assurance.render import legend, tables
from assurance.render.components import REGIONS
from assurance.render.fragments import Links
from assurance.render.model import NodeModel, ReportModel, ScopeModel
from assurance.render.safe import anchor_id, clean_text, short_digest
from assurance.render.tree import tree_rows

__all__ = ["report_context", "scope_context", "report_data", "index_data", "INDEX_COLUMNS"]

_PROBLEM_ORDER = {"failed": 0, "defeated": 0, "stale": 1, "missing": 2}
# Rows per category table; tables list failing and stale rows first, and the evidence index
# (searchable, paged) holds every item, so a longer table would only repeat it.
MAX_TABLE_ROWS = 300


def _anchor_prefixes(model: ReportModel) -> dict[str, tuple[str, str]]:
    """Node and evidence anchor prefixes per scope: plain with one D, D-qualified with several."""
    if len(model.scopes) == 1:
        return {model.scopes[0].deployment_digest: ("n", "e")}
    return {s.deployment_digest: (f"d{short_digest(s.deployment_digest, 8)}-n",
                                  f"d{short_digest(s.deployment_digest, 8)}-e")
            for s in model.scopes}


def _attention(scope: ScopeModel) -> list[dict[str, Any]]:
    """Failed, then stale, then missing nodes and evidence, with their counterexamples."""
    entries = []
    for node in scope.nodes:
        if node.status in _PROBLEM_ORDER:
            entries.append({"rank": _PROBLEM_ORDER[node.status], "kind": "node", "node": node,
                            "status": node.status, "counterexamples": node.counterexamples})
    for item in scope.evidence:
        problem = "failed" if item.status in ("fail", "error") else "stale" if item.is_stale else ""
        if problem:
            cex = item.details.get("counterexample")
            entries.append({"rank": _PROBLEM_ORDER[problem], "kind": "evidence", "item": item,
                            "status": problem, "counterexamples": (cex,) if cex else ()})
    entries.sort(key=lambda e: (e["rank"], e["kind"], e["node"].node_id if e["kind"] == "node"
                                else e["item"].item_id))
    return entries


def _capped(rows: list[Any]) -> dict[str, Any]:
    """The first MAX_TABLE_ROWS rows (problems sort first), and what was left out."""
    left_out = rows[MAX_TABLE_ROWS:]
    return {"rows": rows[:MAX_TABLE_ROWS], "total": len(rows), "num_left_out": len(left_out),
            "num_problems_left_out": sum(1 for r in left_out if not r.is_passing)}


def _metrics(scope: ScopeModel) -> dict[str, Any]:
    statuses = Counter(n.status for n in scope.nodes if n.status)
    flagged = sum(1 for n in scope.nodes if n.is_trusted and (n.review is None or n.review.is_flagged))
    return {
        "num_nodes": len(scope.nodes),
        "num_evidence": len(scope.evidence),
        "by_status": {s: statuses.get(s, 0) for s in legend.STATUS_ORDER if statuses.get(s, 0)},
        "by_category": dict(sorted(Counter(i.category for i in scope.evidence).items())),
        "num_trusted": sum(1 for n in scope.nodes if n.is_trusted),
        "num_trusted_flagged": flagged,
        "num_trusted_base": len(scope.trusted_base),
        "num_stale_evidence": sum(1 for i in scope.evidence if i.is_stale),
        "num_failed_evidence": sum(1 for i in scope.evidence if i.status in ("fail", "error")),
    }


def _verdict(node: NodeModel, scope: ScopeModel) -> dict[str, Any]:
    return {"node": node, "status": node.status,
            "label": legend.VERDICT_TEXT.get(node.status, node.status or "no status"),
            "explanation": legend.STATUS_TEXT.get(node.status, ""),
            "num_trusted_base": len(scope.trusted_base)}


def _sections(scope: ScopeModel) -> dict[str, bool]:
    """Which optional sections the case has something for: a category table when a solution may be
    discharged by that category or the store holds evidence of it, the trusted base when the case
    takes something on trust (the attention list shows when it has entries)."""
    named = {c for n in scope.nodes for c in n.categories} | {i.category for i in scope.evidence}
    has = {"kernel_proofs": "kernel_proof" in named, "runtime_checks": "runtime_config_check" in named,
           "suites": "test_result" in named,
           "trusted": any(n.is_trusted for n in scope.nodes) or "trusted_contract_translation" in named}
    has["categories"] = has["kernel_proofs"] or has["runtime_checks"] or has["suites"]
    return has


def scope_context(scope: ScopeModel, node_prefix: str, evidence_prefix: str) -> dict[str, Any]:
    """Everything the templates show for one deployment configuration."""
    by_id = {n.node_id: n for n in scope.nodes}
    evidence_ids = {i.item_id for i in scope.evidence}
    return {
        "scope": scope,
        "digest": clean_text(scope.deployment_digest),
        "short": short_digest(scope.deployment_digest) or "none",
        "fields": sorted((clean_text(k), clean_text(v)) for k, v in scope.deployment_fields.items()),
        "node_prefix": node_prefix,
        "evidence_prefix": evidence_prefix,
        "by_id": by_id,
        "evidence_ids": evidence_ids,
        "links": Links(node_prefix, evidence_prefix, by_id, evidence_ids),
        "verdicts": [_verdict(by_id[c], scope) for c in scope.top_claims],
        "is_external": scope.deployment_fields.get("kind") == "external",
        "metrics": _metrics(scope),
        "has": _sections(scope),
        "diagram_derived": not scope.components,
        "attention": _attention(scope),
        "rows": tree_rows(scope),
        "kernel_proofs": _capped(tables.kernel_proof_rows(scope.evidence)),
        "runtime_checks": _capped(tables.runtime_check_rows(scope.evidence)),
        "suites": _capped(tables.suite_rows(scope.evidence)),
        "trusted": tables.trusted_rows(scope.nodes),
        "trusted_evidence": [i for i in scope.evidence if i.category == "trusted_contract_translation"],
        "trusted_base": [by_id[t] for t in scope.trusted_base],
        "evidence": sorted(scope.evidence, key=lambda i: (i.category, i.item_id)),
    }


# Columns of an evidence-index row in the report's JSON (the script builds the rows from it).
INDEX_COLUMNS = ("anchor", "id", "category", "status", "is_stale", "obligation", "summary", "produced_at",
                 "producer")


def index_data(s: dict[str, Any]) -> dict[str, Any]:
    """One scope's evidence index as data: column names and one row (a list) per item.

    It goes into its own JSON block, which the script parses only when the index is opened,
    searched or linked to.
    """
    rows = [[anchor_id(s["evidence_prefix"], i.item_id), clean_text(i.item_id), clean_text(i.category),
             clean_text(i.status), i.is_stale, clean_text(i.obligation), clean_text(i.summary),
             clean_text(i.produced_at), clean_text(f"{i.producer_tool} {i.producer_version}")]
            for i in s["evidence"]]
    return {"columns": list(INDEX_COLUMNS), "rows": rows}


def report_data(model: ReportModel, scopes: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON the inline script reads first: verdicts, counts and labels.

    The evidence index (up to 100,000 rows) travels separately as data (:func:`index_data`) and
    the script draws it a page at a time; as markup it would make the browser build over a
    million elements on open.
    """
    return {
        "schema": "bitcase.report/v1",
        "title": clean_text(model.title),
        "statuses": list(legend.STATUS_ORDER),
        "categories": list(legend.CATEGORY_TEXT),
        "scopes": [{
            "deployment": s["digest"],
            "node_count": s["metrics"]["num_nodes"],
            "evidence_count": s["metrics"]["num_evidence"],
            "by_status": s["metrics"]["by_status"],
            "verdicts": [{"node": clean_text(v["node"].node_id), "status": v["status"],
                          "anchor": anchor_id(s["node_prefix"], v["node"].node_id)}
                         for v in s["verdicts"]],
        } for s in scopes],
        "category_labels": dict(legend.CATEGORY_TEXT),
    }


def report_context(model: ReportModel) -> dict[str, Any]:
    """The template context for the whole report (assets and diagram are added by the caller)."""
    prefixes = _anchor_prefixes(model)
    scopes = [scope_context(s, *prefixes[s.deployment_digest]) for s in model.scopes]
    for index, scope_ctx in enumerate(scopes):
        scope_ctx["index"] = index  # position in the JSON data's "scopes" list
    return {
        "model": model,
        "title": clean_text(model.title),
        "case_ref": clean_text(model.case_ref),
        "case_digest": clean_text(model.case_digest),
        "store_ref": clean_text(model.store_ref),
        "as_of": clean_text(model.as_of),
        "chain_summary": clean_text(model.chain_summary),
        "chain_head": clean_text(model.chain_head),
        "verified_at": clean_text(model.verified_at),
        "tool_version": clean_text(model.tool_version),
        "scopes": scopes,
        "status_text": legend.STATUS_TEXT,
        "review_text": legend.REVIEW_TEXT,
        "category_text": legend.CATEGORY_TEXT,
        "region_text": legend.REGION_TEXT,
        "region_labels": REGIONS,
        "edge_text": legend.EDGE_TEXT,
        "data": report_data(model, scopes),
        "any_trusted": any(s["has"]["trusted"] for s in scopes),
        # Header columns: only the statuses that occur, strongest first.
        "status_columns": [st for st in legend.STATUS_ORDER
                           if any(s["metrics"]["by_status"].get(st) for s in scopes)],
    }
