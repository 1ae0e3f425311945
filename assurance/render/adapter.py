"""Assemble a :class:`ReportModel` from the status engine's evaluations and the store's views.

This is the one module that knows both sides: :class:`assurance.evaluation.Evaluation` (one
per deployment configuration D) and :mod:`evidence_db.views`. Everything else in
:mod:`assurance.render` reads only :mod:`assurance.render.model`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Mapping, Sequence

from assurance.evaluation import CONTEXT, Evaluation, NodeResult
from assurance.render.model import (ComponentModel, ContractModel, EvidenceModel, NodeModel, ReportModel, ReviewModel,
                                    ScopeModel)
from assurance.render.reviews import evidence_review
from assurance.reviews import ReviewState, review_state
from assurance.trusted import trusted_base
from evidence_db.views import EvidenceView, ReviewView

__all__ = ["node_model", "scope_model", "report_model"]


def _review(state: ReviewState | None) -> ReviewModel | None:
    if state is None:
        return None
    return ReviewModel(state.state, reviewer=state.reviewer or "", decision=state.decision or "",
                       rationale=state.rationale or "", reviewed_at=state.created_at or "",
                       expires=state.expires.isoformat() if state.expires else "")


def node_model(result: NodeResult, *, case_file: str, review: ReviewState | None = None,
               components: tuple[str, ...] = ()) -> NodeModel:
    """One evaluated node as the report shows it."""
    evidence_ids = sorted({e for o in result.obligations
                           for e in (*o.evidence_ids, *o.stale_ids, *o.defeater_ids)})
    return NodeModel(
        node_id=result.id, kind=result.kind, text=result.text,
        status="" if result.status == CONTEXT else result.status,
        source_ref=f"{case_file}:{result.line}" if result.line else case_file,
        citation=result.source, reasons=tuple(result.reasons), evidence_ids=tuple(evidence_ids),
        children=tuple(result.supported_by), context=tuple(result.in_context_of),
        categories=tuple(dict.fromkeys((*result.requires, *result.any_of))),
        is_trusted=result.is_trusted, trust_rationale=result.rationale,
        review=_review(result.review or review),
        counterexamples=tuple(c.to_json() for c in result.counterexamples), components=components,
    )


def scope_model(evaluation: Evaluation, *, deployment_fields: Mapping[str, Any],
                evidence: Iterable[EvidenceView], reviews: Sequence[ReviewView],
                notes: Sequence[str] = ()) -> ScopeModel:
    """The case under one D: nodes, top claims, trusted base and D's evidence."""
    by_target: dict[str, list[ReviewView]] = defaultdict(list)
    for r in reviews:
        by_target[r.target].append(r)
    case_file = evaluation.case.location
    nodes = []
    stale_ids: set[str] = set()
    for result in evaluation.nodes.values():
        stale_ids.update(result.stale_evidence_ids)
        # The engine attaches a review only while the item counts as trusted; the report shows
        # where the review stands for every trusted item, stale or failed ones included.
        own = (review_state(evaluation.case.node(result.id), by_target.get(result.id, ()), today=evaluation.today)
               if result.is_trusted and result.review is None else None)
        nodes.append(node_model(result, case_file=case_file, review=own,
                                components=evaluation.case.node(result.id).components))
    base = sorted({r.id for top in evaluation.tops for r in trusted_base(evaluation, top)})
    items = []
    for view in evidence:
        if view.deployment_digest != evaluation.deployment_digest:
            continue
        items.append(EvidenceModel(
            item_id=view.item_id, category=view.category, obligation=view.obligation, status=view.status,
            summary=view.summary, produced_at=view.produced_at, content_digest=view.content_digest,
            producer_tool=view.producer_tool, producer_version=view.producer_version,
            subjects=tuple((s.uri, s.sha256) for s in view.subjects), details=view.details or {},
            is_stale=view.item_id in stale_ids,
            review=(evidence_review(view.item_id, view.content_digest, by_target[view.item_id], today=evaluation.today)
                    if view.item_id in by_target else None)))
    return ScopeModel(deployment_digest=evaluation.deployment_digest, deployment_fields=dict(deployment_fields),
                      nodes=tuple(nodes), top_claims=tuple(evaluation.tops), trusted_base=tuple(base),
                      evidence=tuple(items), notes=tuple(notes),
                      components=tuple(ComponentModel(c.id, c.label) for c in evaluation.case.components),
                      contracts=tuple(ContractModel(c.id, c.source, c.target, c.label)
                                      for c in evaluation.case.contracts),
                      system=evaluation.case.id)


def report_model(evaluations: Sequence[tuple[Evaluation, Mapping[str, Any], Sequence[str]]], *,
                 evidence: Sequence[EvidenceView], reviews: Sequence[ReviewView], store_ref: str,
                 case_ref: str = "", case_digest: str = "", chain: Mapping[str, Any] | None = None,
                 tool_version: str = "") -> ReportModel:
    """The whole report: one scope per (evaluation, D's fields, notes), in the given order.

    ``chain`` is the hash chain check the views were read under (``VerifiedStore.chain_json()``).
    """
    from evidence_db.verified_read import chain_summary

    if not evaluations:
        raise ValueError("no deployment configuration to report on")
    case = evaluations[0][0].case
    scopes = tuple(scope_model(ev, deployment_fields=fields, evidence=evidence, reviews=reviews, notes=notes)
                   for ev, fields, notes in evaluations)
    as_of = max((i.produced_at for s in scopes for i in s.evidence), default="")
    return ReportModel(title=case.title or f"Assurance case {case.id}", case_ref=case_ref or case.location,
                       case_digest=case_digest, store_ref=store_ref, scopes=scopes, as_of=as_of,
                       chain_summary=chain_summary(chain) if chain else "",
                       chain_head=f"seq {chain['head']['seq']} {chain['head']['digest']}" if chain else "",
                       verified_at=chain["verified_at"] if chain else "", tool_version=tool_version)
