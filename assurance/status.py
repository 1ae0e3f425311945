"""Evaluate a case under one deployment configuration D: the pure status engine.

``evaluate`` takes a parsed (expanded) case, the evidence and review views, the current subject
digests and D's digest, and derives every node's status; it touches no database or file. Claims
(goals and strategies) aggregate their supporters bottom-up (rules A1–A6 in
``docs/status-rules.md``).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date, datetime, timezone
from typing import Any, Iterable, Mapping

from assurance.case_model import Case, Condition, Node
from assurance.evaluation import (CONTEXT, NOT_APPLICABLE, TRUSTED_STATUSES, Evaluation, NodeResult)
from assurance.graph import AssuranceGraph
from assurance.ids import CONTEXT_KINDS, NodeId
from assurance.reviews import rejected_evidence, review_state
from assurance.freshness import Freshness
from assurance.solution_status import EvidenceIndex, solution_verdict
from evidence_db.views import EvidenceView, ReviewView

__all__ = ["evaluate", "aggregate", "is_applicable"]

_DEFEATING = ("failed", "defeated")
_INCOMPLETE = ("stale", "missing", "incomplete", "distrusted")
_UNDER_TRUST = TRUSTED_STATUSES + ("supported-under-trust",)


def is_applicable(node: Node, fields: Mapping[str, Any] | None) -> tuple[bool, str | None]:
    """Whether ``node`` applies under D's ``fields`` (rule A0), with a note when it cannot be judged.

    Field names may be dotted paths into nested tables of D. Unknown D or a field D lacks keeps
    the node (the conservative reading: the claim rests on more).
    """
    if fields is None or not (node.when or node.when_not):
        return True, None

    found = {name: _lookup(fields, name) for name, _ in node.when + node.when_not}
    missing = sorted(name for name, value in found.items() if value is _MISSING)
    when_ok = all(found[name] is not _MISSING and _text(found[name]) in values for name, values in node.when)
    if not when_ok and not any(name in missing for name, _ in node.when):
        return False, None
    if any(found[name] is not _MISSING and _text(found[name]) in values for name, values in node.when_not):
        return False, None
    return True, (f"D has no field {', '.join(missing)}; the node is kept" if missing else None)


_MISSING = object()


def _lookup(fields: Mapping[str, Any], name: str) -> Any:
    """``fields[name]``, or a dotted path into nested tables (``engine.device``)."""
    if name in fields:
        return fields[name]
    value: Any = fields
    for part in name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def aggregate(node: Node, child_statuses: Mapping[NodeId, str],
              generated_parent_without_plan: bool = False) -> tuple[str, tuple[str, ...]]:
    """A claim's status from its applicable supporters' statuses (rules A1–A6)."""
    if node.is_undeveloped:
        return "incomplete", ("goal is marked undeveloped",)
    children = {c: s for c, s in child_statuses.items() if s not in (NOT_APPLICABLE, CONTEXT)}
    if not children:
        why = ("no sealed plan was available to generate its supporting nodes" if generated_parent_without_plan
               else "no applicable supporting nodes")
        return "incomplete", (why,)
    defeating = sorted(c for c, s in children.items() if s in _DEFEATING)
    if defeating:
        return "defeated", tuple(f"defeated by {c} ({children[c]})" for c in defeating)
    lacking = sorted(c for c, s in children.items() if s in _INCOMPLETE)
    if lacking:
        return "incomplete", tuple(f"{c} is {children[c]}" for c in lacking)
    trusted = sorted(c for c, s in children.items() if s in _UNDER_TRUST)
    if trusted:
        return "supported-under-trust", tuple(f"{c} is {children[c]}" for c in trusted)
    return "supported", ()


def evaluate(case: Case, *, evidence: Iterable[EvidenceView], reviews: Iterable[ReviewView],
             subjects: Mapping[str, str], deployment_digest: str,
             deployment_fields: Mapping[str, Any] | None = None, today: date | None = None,
             now: datetime | None = None, elsewhere: Mapping[str, int] | None = None) -> Evaluation:
    """Derive every node's status under D (see ``docs/status-rules.md``).

    ``subjects`` maps subject keys (``code:<path>``, ``model``) to current digests; D's digest
    stands for the ``deployment`` subject. ``today``/``now`` default to the current UTC date/time.
    ``evidence`` may hold only D's items when ``elsewhere`` counts, per obligation, the items
    under other configurations it leaves out (rule R7 needs only their number); the result is
    the same as with every item given. Only D's items need ``details``, and of those only
    the ones :data:`~assurance.solution_status.RULE_DETAILS` selects.
    """
    now = now or datetime.now(timezone.utc)
    today = today or now.date()
    graph = AssuranceGraph.from_case(case)
    order = graph.top_down()
    reviews = list(reviews)
    index = EvidenceIndex(evidence, deployment_digest, rejected_evidence(reviews), elsewhere)
    reviews_by_target: dict[str, list[ReviewView]] = defaultdict(list)
    for r in reviews:
        reviews_by_target[r.target].append(r)
    fresh = Freshness(subjects, deployment_digest, now)
    generated_parents = {g.parent for g in case.generators} if not case.is_expanded else set()

    statuses: dict[NodeId, str] = {}
    results: dict[NodeId, NodeResult] = {}
    applicable: dict[NodeId, tuple[bool, str | None]] = {}
    for node_id in order:  # applicability flows down: a node under an excluded claim is excluded too
        node = case.node(node_id)
        ok, note = is_applicable(node, deployment_fields)
        parents = graph.supports(node_id)
        if parents and not any(applicable[p][0] for p in parents):
            ok, note = False, None
        applicable[node_id] = (ok, note)

    claimed: set[str] = set()
    for node_id in reversed(order):
        node = case.node(node_id)
        ok, note = applicable[node_id]
        base = dict(id=node.id, kind=node.kind, text=node.text, source=node.source, line=node.line,
                    generated_by=node.generated_by, supported_by=node.supported_by,
                    in_context_of=node.in_context_of, is_undeveloped=node.is_undeveloped,
                    requires=node.requires, any_of=node.any_of, subjects=node.subjects,
                    is_trusted=node.is_trusted, rationale=node.rationale)
        claimed.update(node.obligations if node.kind == "solution" else ())
        notes = (note,) if note else ()
        if not ok:
            status, reasons, extra = NOT_APPLICABLE, ("its `when` condition excludes it under D",), {}
        elif node.kind in CONTEXT_KINDS:
            status, reasons, extra = CONTEXT, notes, {}
        elif node.kind == "solution":
            review = review_state(node, reviews_by_target.get(node.id, ()), today=today) if node.is_trusted else None
            verdict = solution_verdict(node, index, fresh=fresh, review=review)
            status, reasons = verdict.status, notes + verdict.reasons
            extra = dict(obligations=verdict.obligations, counterexamples=verdict.counterexamples,
                         review=review if verdict.status in TRUSTED_STATUSES else None)
        else:
            child = {c: statuses[c] for c in graph.supported_by(node_id)}
            status, why = aggregate(node, child, node_id in generated_parents)
            reasons, extra = notes + why, {}
        statuses[node_id] = status
        results[node_id] = NodeResult(status=status, reasons=tuple(reasons), **base, **extra)

    ordered = {n: results[n] for n in order}
    roots = [r for r in graph.roots() if case.node(r).kind == "goal"]
    tops = tuple([case.top] if case.top in roots else []) + tuple(r for r in roots if r != case.top)
    unclaimed = {o: len(items) for o, items in index.latest.items() if o not in claimed}
    return Evaluation(case=case, graph=graph, deployment_digest=deployment_digest, today=today, nodes=ordered,
                      tops=tops, num_evidence=index.num_given, num_evidence_under_d=index.num_under_d,
                      unclaimed_obligations=unclaimed)
