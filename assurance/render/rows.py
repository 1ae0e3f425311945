"""The report's repeated rows, built in Python: argument-tree rows, reviews, key-value lists.

A large case has 10,000 tree rows; as Jinja markup they take seconds, as these functions a
fraction of one. Every value passes through
:func:`~assurance.render.fragments.esc` or :func:`~assurance.render.fragments.long_html`
(clean, then HTML-escape); URLs are linked only through :func:`~assurance.render.safe.safe_url`.
"""

from __future__ import annotations

from typing import Any, Mapping

from markupsafe import Markup

from assurance.render.fragments import Links, badge_html, esc, escape, long_html
from assurance.render.model import ReviewModel
from assurance.render.safe import anchor_id, clean_text, safe_url
from assurance.render.tree import TreeRow

__all__ = ["status_tokens", "tree_row", "review_badge", "kv", "MAX_TREE_EVIDENCE_LINKS"]

MAX_TREE_EVIDENCE_LINKS = 5


def status_tokens(status: str, is_stale: bool) -> str:
    """The filter tokens of an evidence row: its status, plus ``failed`` and ``stale`` when they apply."""
    tokens = clean_text(status)
    if status in ("fail", "error"):
        tokens += " failed"
    return tokens + " stale" if is_stale else tokens


def _review_html(review: ReviewModel | None) -> str:
    if review is None:
        return '<span class="badge rv-unreviewed flag">unreviewed</span>'
    flag = " flag" if review.is_flagged else ""
    out = f'<span class="badge rv-{esc(review.state)}{flag}">{esc(review.state)}</span>'
    if review.reviewer:
        when = f", {esc(review.reviewed_at[:10])}" if review.reviewed_at else ""
        until = f", expires {esc(review.expires)}" if review.expires else ""
        out += f' <span class="muted">by {esc(review.reviewer)}{when}{until}</span>'
    if review.rationale:
        out += f'<div class="muted">“{long_html(review.rationale, 160)}”</div>'
    return out


def review_badge(review: ReviewModel | None) -> Markup:
    """Where an item's audit review stands: state, reviewer, date, expiry and rationale."""
    return Markup(_review_html(review))  # noqa: S704 - built from escaped parts only


def _kv_html(value: Any) -> str:
    if not isinstance(value, Mapping):
        return f'<span class="cex">{long_html(value, 240)}</span>'
    parts = []
    for key in sorted(value, key=str):
        url = safe_url(value[key])
        shown = (f'<a href="{escape(url)}" rel="noopener noreferrer nofollow">{long_html(url, 120)}</a>'
                 if url else long_html(value[key], 240))
        parts.append(f"<dt>{long_html(key, 80)}</dt><dd>{shown}</dd>")
    return f'<dl class="kv">{"".join(parts)}</dl>'


def kv(value: Any) -> Markup:
    """A mapping as a definition list (http(s) values linked), anything else as text."""
    return Markup(_kv_html(value))  # noqa: S704 - built from escaped parts only


def _details_html(row: TreeRow, links: Links) -> str:
    n = row.node
    meta = []
    if n.source_ref:
        meta.append(f"defined at <code>{long_html(n.source_ref, 120)}</code>")
    if n.citation:
        meta.append(f"cites {long_html(n.citation, 120)}")
    if n.categories:
        meta.append(f"discharged by {esc(', '.join(n.categories))}")
    out = [f'<div class="more nojs-show" hidden><p class="muted">{" · ".join(meta)}</p>']
    if n.reasons:
        out.append('<ul class="reasons">' + "".join(f"<li>{long_html(r, 240)}</li>" for r in n.reasons[:20]) + "</ul>")
    if n.is_trusted:
        rationale = long_html(n.trust_rationale, 240) if n.trust_rationale else "none given"
        out.append(f"<p>Rationale: {rationale}</p><p>Review: {_review_html(n.review)}</p>")
    if n.evidence_ids:
        shown = ", ".join(str(links.evidence(e)) for e in n.evidence_ids[:MAX_TREE_EVIDENCE_LINKS])
        more = len(n.evidence_ids) - MAX_TREE_EVIDENCE_LINKS
        tail = f" and {more} more (search the evidence index for {esc(n.node_id)})" if more > 0 else ""
        out.append(f"<p>Evidence ({len(n.evidence_ids)}): {shown}{tail}</p>")
    for cex in n.counterexamples[:5]:
        out.append(f'<div class="cex"><span class="cex-label">counterexample</span>{_kv_html(cex)}</div>')
    return "".join(out) + "</div>"


_CONTEXT_MARK = '<span class="rel">in context of</span> '
_TRUSTED_MARK = '<span class="badge trust">trusted</span> '
_REF_MARK = ' <span class="muted">(written out above)</span>'
_TOGGLE = '<button type="button" class="tog" aria-expanded="true" aria-label="collapse"></button>'
_NO_TOGGLE = '<span class="tog-pad"></span>'
_DETAILS_BUTTON = ' <button type="button" class="more-tog" aria-expanded="false">details</button>'


def tree_row(row: TreeRow, node_prefix: str, links: Links) -> Markup:
    """One row of the collapsible argument tree (an ``<li>`` with its depth and filter data)."""
    n = row.node
    anchor = escape(anchor_id(node_prefix, n.node_id))
    categories = " ".join(n.categories) + (" trusted_contract_translation" if n.is_trusted else "")
    classes = f"node k-{esc(n.kind)}" + (" ref" if row.is_ref else "") + (" trusted" if n.is_trusted else "")
    head = "".join((
        _TOGGLE if row.num_children else _NO_TOGGLE,
        _CONTEXT_MARK if row.relation == "in-context-of" else "",
        f'<a class="nid" href="#{anchor}">{long_html(n.node_id, 80)}</a> <span class="kind">{esc(n.kind)}</span> ',
        badge_html(n.status) + " " if n.status else "",
        _TRUSTED_MARK if n.is_trusted else "",
        f'<span class="text">{long_html(n.text, 200)}</span>',
        _REF_MARK if row.is_ref else "",
    ))
    has_details = not row.is_ref and (n.reasons or n.evidence_ids or n.source_ref or n.citation or n.is_trusted
                                      or n.counterexamples)
    if has_details:
        head += _DETAILS_BUTTON
    id_attr = "" if row.is_ref else f' id="{anchor}"'
    return Markup(  # noqa: S704 - every part is escaped
        f'<li class="{classes}"{id_attr} data-depth="{row.depth}" data-status="{esc(n.status)}" '
        f'data-kind="{esc(n.kind)}" data-category="{esc(categories)}" style="--depth:{row.depth}">'
        f'<div class="row">{head}</div>{_details_html(row, links) if has_details else ""}</li>\n')
