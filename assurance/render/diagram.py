"""The trust-boundary diagram as DOT, built with pydot (imported lazily).

Regions (clusters) hold the components by how they are assured; the contracts that cross
a boundary are edges; a legend cluster says what each region and edge style means. The
components and contracts come from the case (:mod:`assurance.render.components`). DOT ids are
ASCII letters, digits and ``_`` and never contain ``:``; all case text goes into quoted labels. The same scope gives the same DOT bytes: everything is emitted in
sorted order and nothing depends on time or the machine.
"""

from __future__ import annotations

import html
import textwrap
from collections import Counter, defaultdict
from typing import TYPE_CHECKING

from assurance.render.components import REGIONS, layout, region_of
from assurance.render.legend import EDGE_TEXT, REGION_TEXT
from assurance.render.model import ScopeModel
from assurance.render.safe import clean_text, short_digest

if TYPE_CHECKING:
    import pydot

__all__ = ["rests_on", "build_diagram", "dot_source", "dot_quote", "UnknownNodeError"]

_MAX_LABEL_CHARS = 80
_REGION_COLOURS = {"verified": "#1a7f37", "runtime-checked": "#0a6f8f", "tested": "#4b5fc1",
                   "trusted": "#9a6700", "unsupported": "#cf222e", "outside": "#6e7781"}
_PROBLEMS = ("failed", "stale", "missing")


class UnknownNodeError(KeyError):
    """The focus node is not in the case."""


def dot_quote(text: object, max_chars: int = _MAX_LABEL_CHARS, *, wrap_at: int | None = None) -> str:
    """``text`` as a quoted DOT string: cleaned, wrapped or cut, backslashes and quotes escaped.

    Quoting ourselves keeps pydot from reading ``<…>`` as an HTML label and Graphviz from
    expanding escapes such as ``\\N`` in hostile text.
    """
    lines = clean_text(text).split("\n")
    if wrap_at:
        lines = [part for line in lines for part in (textwrap.wrap(line, wrap_at) or [""])]
    cut = [line if len(line) <= max_chars else line[: max_chars - 1] + "…" for line in lines[:6]]
    body = "\n".join(cut).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{body}"'


def rests_on(scope: ScopeModel, node_id: str) -> set[str]:
    """``node_id`` and every node it rests on (supported-by and in-context-of, transitively)."""
    by_id = {n.node_id: n for n in scope.nodes}
    if node_id not in by_id:
        raise UnknownNodeError(node_id)
    seen, stack = {node_id}, [node_id]
    while stack:
        node = by_id[stack.pop()]
        for kid in (*node.children, *node.context):
            if kid in by_id and kid not in seen:
                seen.add(kid)
                stack.append(kid)
    return seen


def _summary(statuses: list[str], is_excluded: bool) -> str:
    """Counts per status, or why there is nothing to count."""
    if not statuses:
        return "(not applicable under D)" if is_excluded else "(no case node)"
    counts = Counter(statuses)
    return " · ".join(f"{counts[s]} {s}" for s in sorted(counts))


def build_diagram(scope: ScopeModel, *, focus: str | None = None) -> "pydot.Dot":
    """The diagram for one scope; with ``focus``, only what that claim rests on."""
    import pydot  # lazily: the CLI's --help must not pay for it

    keep = rests_on(scope, focus) if focus else {n.node_id for n in scope.nodes}
    drawn = layout(scope)
    attached: dict[str, list[str]] = defaultdict(list)  # key -> statuses of attached nodes
    members: dict[str, list[str]] = defaultdict(list)  # key -> attached node ids
    excluded: set[str] = set()  # keys whose only case nodes do not apply under D
    for node in sorted(scope.nodes, key=lambda n: n.node_id):
        if node.node_id not in keep:
            continue
        for key in drawn.attached.get(node.node_id, ()):
            if node.status == "not-applicable":
                excluded.add(key)
                continue
            attached[key].append(node.status or "missing")
            members[key].append(node.node_id)

    contracts = [c for c in drawn.contracts if not focus or c.key in attached]
    used = {c.source for c in contracts} | {c.target for c in contracts}
    components = [c for c in drawn.components if not focus or c.key in attached or c.key in used]

    title = f"Trust boundaries under D {short_digest(scope.deployment_digest)}"
    if focus:
        title += f": what {clean_text(focus)} rests on"
    if scope.deployment_fields.get("kind") == "external":
        title += " (an external engine: test evidence about a black box; its inside is outside the case)"
    graph = pydot.Dot("trust_boundaries", graph_type="digraph", rankdir="LR", compound="true",
                      fontname="Helvetica", fontsize="12", label=dot_quote(title, 160),
                      labelloc="t", nodesep="0.4", ranksep="0.9")
    graph.set_node_defaults(shape="box", style="rounded,filled", fillcolor="white",
                            fontname="Helvetica", fontsize="11")
    graph.set_edge_defaults(fontname="Helvetica", fontsize="9")

    by_region: dict[str, list] = defaultdict(list)
    for comp in components:
        by_region[region_of(attached.get(comp.key, []))].append(comp)
    for region, label in REGIONS.items():
        if not by_region.get(region):
            continue
        colour = _REGION_COLOURS[region]
        cluster = pydot.Cluster(region.replace("-", "_"), label=dot_quote(label),
                                color=dot_quote(colour), fontcolor=dot_quote(colour),
                                style="rounded,dashed" if region in ("trusted", "outside") else "rounded")
        for comp in by_region[region]:
            statuses = attached.get(comp.key, [])
            has_problem = any(s in _PROBLEMS for s in statuses)
            label = textwrap.shorten(clean_text(comp.label), 100, placeholder="…")
            text = "\n".join(textwrap.wrap(label, 34)) + "\n" + _summary(
                statuses, comp.key in excluded)
            cluster.add_node(pydot.Node(comp.key, label=dot_quote(text),
                                        color=dot_quote("#cf222e" if has_problem else colour),
                                        penwidth="2.5" if has_problem else "1.2",
                                        tooltip=dot_quote(", ".join(members.get(comp.key, [])[:12]) or comp.label, 400)))
        graph.add_subgraph(cluster)

    for contract in contracts:
        statuses = attached.get(contract.key, [])
        region = region_of(statuses)
        colour = "#cf222e" if any(s in _PROBLEMS for s in statuses) else _REGION_COLOURS[region]
        status_text = _summary(statuses, contract.key in excluded)
        graph.add_edge(pydot.Edge(contract.source, contract.target,
                                  label=dot_quote(f"{contract.label}\n{status_text}", wrap_at=40),
                                  color=dot_quote(colour), fontcolor=dot_quote(colour),
                                  style="dashed" if region in ("trusted", "outside") else "solid",
                                  tooltip=dot_quote(", ".join(members.get(contract.key, [])[:12]) or contract.label, 400)))

    if focus:
        claim = next(n for n in scope.nodes if n.node_id == focus)
        graph.add_node(pydot.Node("focus_claim", shape="note", fillcolor=dot_quote("#f4f6f8"),
                                  label=dot_quote(f"{focus} ({claim.status or 'no status'})\n{claim.text}")))
        for comp in components:
            if comp.key in attached:
                graph.add_edge(pydot.Edge("focus_claim", comp.key, style="dotted", arrowhead="none",
                                          color=dot_quote("#6e7781")))
    graph.add_subgraph(_legend(pydot, derived=drawn.is_derived))
    return graph


def _legend(pydot, *, derived: bool) -> "pydot.Cluster":
    """What each region and edge style means: fixed text, the same in every diagram.

    The one HTML-like label in the diagram; it holds only our own escaped text, never the case's.
    """
    rows = []
    for region, text in REGION_TEXT.items():
        colour = _REGION_COLOURS[region]
        border = ' STYLE="dashed"' if region in ("trusted", "outside") else ""
        rows.append(f'<TR><TD BORDER="1" COLOR="{colour}"{border} WIDTH="18"> </TD>'
                    f'<TD ALIGN="LEFT"><FONT COLOR="{colour}">{html.escape(REGIONS[region])}</FONT></TD>'
                    f'<TD ALIGN="LEFT">{html.escape(text)}</TD></TR>')
    notes = [EDGE_TEXT["red"]]
    if derived:
        notes.append("The case declares no [[component]] tables: the components are derived from its argument "
                     "(one per branch, and each trusted item its own).")
    rows += [f'<TR><TD COLSPAN="3" ALIGN="LEFT">{html.escape(n)}</TD></TR>' for n in notes]
    table = f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="3">{"".join(rows)}</TABLE>>'
    legend = pydot.Cluster("legend", label=dot_quote("Legend"), color=dot_quote("#8c959f"),
                           fontcolor=dot_quote("#57606a"), style="rounded")
    legend.add_node(pydot.Node("legend_regions", shape="plaintext", fontsize="9", label=table))
    for style in ("solid", "dashed"):
        ends = (f"legend_{style}_from", f"legend_{style}_to")
        for end in ends:
            legend.add_node(pydot.Node(end, shape="point", width="0.06", color=dot_quote("#57606a")))
        legend.add_edge(pydot.Edge(*ends, style=style, color=dot_quote("#57606a"), fontsize="9",
                                   label=dot_quote(f"{style}: {EDGE_TEXT[style]}", wrap_at=60)))
    return legend


def dot_source(scope: ScopeModel, *, focus: str | None = None) -> str:
    """The diagram as DOT text (deterministic for equal input)."""
    return build_diagram(scope, focus=focus).to_string()
