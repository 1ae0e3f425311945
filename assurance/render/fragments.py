"""Small HTML fragments the templates call as functions, for speed on large cases.

Each fragment escapes every value it is given with ``html.escape`` (the same five characters
autoescaping escapes) after :func:`~assurance.render.safe.clean_text`, so evidence text is as inert here as
in a template. They build strings with f-strings over escaped parts rather than Jinja macros
or ``Markup.format``, which cost ten times more: the evidence index can hold 100,000 rows.
"""

from __future__ import annotations

import re
from html import escape as _html_escape
from typing import Any, Collection

from markupsafe import Markup

from assurance.render.safe import MAX_PREVIEW_CHARS, anchor_id, clean_text

__all__ = ["escape", "esc", "long_html", "long_text", "badge_html", "badge", "Links"]


_SPECIAL = re.compile("[&<>\"']")


def escape(text: str) -> str:
    """``&``, ``<``, ``>``, ``"`` and ``'`` escaped, as a plain string (no Markup object per call)."""
    return _html_escape(text, quote=True) if _SPECIAL.search(text) else text


def esc(value: Any) -> str:
    """``value`` cleaned and HTML-escaped, as a plain string ready to concatenate."""
    return escape(clean_text(value))


def long_html(value: Any, max_chars: int) -> str:
    """Cleaned, escaped text; past ``max_chars`` a preview and a button that shows the whole text.

    A button and a ``hidden`` element rather than ``<details>``: Chromium lays out thousands
    of closed ``<details>`` in rows that a filter hides or shows in quadratic time.
    """
    text = clean_text(value)
    if len(text) <= max_chars:
        return escape(text)
    return (f'<span class="long">{escape(text[:max_chars])}… <button type="button" class="more-tog" '
            f'aria-expanded="false">show all {len(text)} characters</button>'
            f'<span class="full nojs-show" hidden>{escape(text)}</span></span>')


def long_text(value: Any, max_chars: int = MAX_PREVIEW_CHARS) -> Markup:
    """Cleaned, escaped text; past ``max_chars`` a preview with the full text in a collapsed block."""
    return Markup(long_html(value, max_chars))  # noqa: S704 - built from escaped parts only


def badge_html(status: str) -> str:
    text = esc(status)
    return f'<span class="badge st-{text or "none"}">{text or "—"}</span>'


def badge(status: str) -> Markup:
    """A status pill."""
    return Markup(badge_html(status))  # noqa: S704 - built from escaped parts only


class Links:
    """Links to node and evidence anchors of one scope; ids not in the scope are shown, not linked."""

    __slots__ = ("node_prefix", "evidence_prefix", "node_ids", "evidence_ids")

    def __init__(self, node_prefix: str, evidence_prefix: str, node_ids: Collection[str],
                 evidence_ids: Collection[str]) -> None:
        self.node_prefix, self.evidence_prefix = node_prefix, evidence_prefix
        self.node_ids, self.evidence_ids = node_ids, evidence_ids

    def node(self, node_id: str) -> Markup:
        """A link to a node's row in the argument tree."""
        if node_id in self.node_ids:
            anchor = escape(anchor_id(self.node_prefix, node_id))
            return Markup(f'<a class="nid" href="#{anchor}">{long_html(node_id, 80)}</a>')  # noqa: S704
        return Markup(f'<span class="nid">{long_html(node_id, 80)}</span>')  # noqa: S704

    def evidence(self, item_id: str) -> Markup:
        """A link to an evidence item's row in the evidence index."""
        if item_id in self.evidence_ids:
            anchor = escape(anchor_id(self.evidence_prefix, item_id))
            return Markup(f'<a class="eid" href="#{anchor}">{long_html(item_id, 80)}</a>')  # noqa: S704
        return Markup('<span class="eid missing" title="not in the store for this deployment configuration">'  # noqa: S704
                      f'{long_html(item_id, 80)}</span>')
