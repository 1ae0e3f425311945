"""The terminal view of an evaluation: a rich tree per top claim, with a status legend."""

from __future__ import annotations

from rich.text import Text
from rich.tree import Tree

from assurance.evaluation import CONTEXT, NOT_APPLICABLE, Evaluation, NodeResult
from assurance.ids import NodeId

__all__ = ["STATUS_STYLE", "status_tree", "status_text", "unclaimed_note", "MAX_LISTED_UNCLAIMED"]

STATUS_STYLE = {
    "verified": "bold green", "runtime-checked": "cyan", "tested": "blue",
    "trusted-reviewed": "yellow", "trusted-unreviewed": "dark_orange", "stale": "magenta",
    "failed": "bold red", "missing": "red", "supported": "bold green",
    "supported-under-trust": "bold yellow", "defeated": "bold red", "incomplete": "red",
    NOT_APPLICABLE: "dim", CONTEXT: "dim", "distrusted": "bold red",
}
_MAX_TEXT = 110
MAX_LISTED_UNCLAIMED = 8


def status_text(status: str) -> Text:
    """A status as a styled badge."""
    return Text(f"[{status}]", style=STATUS_STYLE.get(status, ""))


def _label(r: NodeResult, *, repeated: bool = False) -> Text:
    text = " ".join(r.text.split())
    if len(text) > _MAX_TEXT:
        text = text[: _MAX_TEXT - 1] + "…"
    label = Text()
    if r.kind in ("context", "assumption", "justification"):
        label.append(f"{r.kind} ", style="dim italic")
        label.append(r.id, style="dim")
        label.append(f"  {text}", style="dim")
        return label
    label.append_text(status_text(r.status))
    label.append(f" {r.id}", style="bold")
    if r.is_trusted:
        label.append(" (trusted)", style="yellow")
    if repeated:
        label.append("  (shown above)", style="dim")
        return label
    label.append(f"  {text}")
    if r.kind == "solution" and r.evidence_ids:
        label.append(f"  · {len(r.evidence_ids)} evidence", style="dim")
    return label


def _detail_lines(r: NodeResult) -> list[Text]:
    lines = []
    if r.status not in ("verified", "runtime-checked", "tested", "supported", "trusted-reviewed", CONTEXT,
                        NOT_APPLICABLE, "supported-under-trust"):
        for reason in r.reasons[:2]:
            lines.append(Text(f"↳ {reason}", style=STATUS_STYLE.get(r.status, "dim")))
    for cex in r.counterexamples[:2]:
        lines.append(Text(f"✗ counterexample {cex.evidence_id}: {cex.summary}", style="red"))
    return lines


def status_tree(evaluation: Evaluation, *, show_not_applicable: bool = False) -> list[Tree]:
    """One tree per top claim; a node reached twice is shown in full once, then referenced."""
    shown: set[NodeId] = set()
    trees = []

    def add(branch: Tree, node_id: NodeId) -> None:
        r = evaluation.node(node_id)
        if r.status == NOT_APPLICABLE and not show_not_applicable:
            return
        repeated = node_id in shown and r.kind != "context"
        child = branch.add(_label(r, repeated=repeated))
        if repeated:
            return
        shown.add(node_id)
        fill(child, r)

    def fill(tree: Tree, r: NodeResult) -> None:
        for line in _detail_lines(r):
            tree.add(line)
        for ctx in sorted(r.in_context_of):
            tree.add(_label(evaluation.node(ctx)))
        for child in r.supported_by:
            add(tree, child)

    for top in evaluation.tops:
        r = evaluation.node(top)
        tree = Tree(_label(r))
        shown.add(top)
        fill(tree, r)
        trees.append(tree)
    return trees


def unclaimed_note(evaluation: Evaluation) -> str | None:
    """A line naming the obligations evidence under D names but no solution covers, if any.

    They usually come from a mistyped JUnit mapping or a case edit that renamed an obligation.
    """
    unclaimed = evaluation.unclaimed_obligations
    if not unclaimed:
        return None
    names = sorted(unclaimed)
    shown = ", ".join(f"{o} ({unclaimed[o]} item(s))" for o in names[:MAX_LISTED_UNCLAIMED])
    more = f" and {len(names) - MAX_LISTED_UNCLAIMED} more" if len(names) > MAX_LISTED_UNCLAIMED else ""
    return (f"evidence under D names {len(names)} obligation(s) no solution of the case covers: {shown}{more}; "
            "they count toward nothing (`bitcase case obligations` lists the case's ids; re-map a JUnit "
            "report with `bitcase ingest --remap`)")
