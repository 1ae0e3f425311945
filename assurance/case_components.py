"""The ``[[component]]`` and ``[[contract]]`` tables of a case, and the nodes' ``component`` field.

Components are the parts of the system the trust-boundary diagram draws; contracts are what one
component relies on another for. A goal, strategy or solution names the components or contracts
it is about with ``component = "id"`` (or a list). Every problem is an
:class:`~assurance.issues.Issue` naming the file, the line and the fix; the format is documented
in ``docs/case-format.md``.
"""

from __future__ import annotations

import difflib
from typing import Any, Iterable, Mapping

from assurance.case_model import Component, Contract, Node
from assurance.ids import dot_safety_problem
from assurance.issues import Issue

__all__ = ["COMPONENT_KEYS", "CONTRACT_KEYS", "COMPONENT_NODE_KINDS", "parse_components", "component_issues"]

COMPONENT_KEYS = ("id", "label")
CONTRACT_KEYS = ("id", "from", "to", "label")
COMPONENT_NODE_KINDS = ("goal", "strategy", "solution")


def _unknown_keys(raw: Mapping[str, Any], allowed: tuple[str, ...], where: str, file: str, line: int) -> list[Issue]:
    issues = []
    for key in sorted(set(raw) - set(allowed)):
        close = difflib.get_close_matches(key, allowed, n=1)
        fix = f"did you mean '{close[0]}'?" if close else f"remove it; known keys: {', '.join(allowed)}"
        issues.append(Issue("unknown-key", file, None, f"unknown key '{key}' in {where}", fix, line))
    return issues


def _text(raw: Mapping[str, Any], key: str, where: str, file: str, line: int, issues: list[Issue]) -> str:
    value = raw.get(key)
    if isinstance(value, str) and value.strip():
        return value
    what = "has no" if value is None else "needs a non-empty string for"
    issues.append(Issue("missing-key" if value is None else "type", file, None, f"{where} {what} '{key}'",
                        f'add {key} = "..."', line))
    return ""


def _entries(data: Mapping[str, Any], name: str, lines: list[int], file: str,
             issues: list[Issue]) -> list[tuple[dict[str, Any], int]]:
    value = data.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        issues.append(Issue("type", file, None, f"'{name}' must be an array of tables",
                            f"write each entry as a [[{name}]] table"))
        return []
    return [(raw, lines[i] if i < len(lines) else 0) for i, raw in enumerate(value)]


def parse_components(data: Mapping[str, Any], *, file: str, component_lines: list[int],
                     contract_lines: list[int]) -> tuple[tuple[Component, ...], tuple[Contract, ...], list[Issue]]:
    """The components and contracts of parsed case TOML ``data``, and every problem with them.

    Components and contracts share one namespace, since a node's ``component`` may name either.
    """
    issues: list[Issue] = []
    seen: dict[str, int] = {}

    def claim(ident: str, where: str, line: int) -> bool:
        problem = dot_safety_problem(ident) if ident else None
        if problem:
            issues.append(Issue("dot-unsafe-id", file, None, f"{where}: id {ident!r} {problem}",
                                "use letters, digits, '_', '.' and '-', starting with a letter", line))
            return False
        if ident in seen:
            first = f" (first at line {seen[ident]})" if seen[ident] else ""
            issues.append(Issue("duplicate-component", file, None, f"{where}: id {ident!r} is already declared{first}",
                                "give every component and contract its own id", line))
            return False
        seen[ident] = line
        return bool(ident)

    components = []
    for raw, line in _entries(data, "component", component_lines, file, issues):
        where = f"[[component]] {raw['id']}" if isinstance(raw.get("id"), str) else "a [[component]] table"
        issues += _unknown_keys(raw, COMPONENT_KEYS, where, file, line)
        ident, label = _text(raw, "id", where, file, line, issues), _text(raw, "label", where, file, line, issues)
        if claim(ident, where, line):
            components.append(Component(ident, label or ident, line))

    names = [c.id for c in components]
    contracts = []
    for raw, line in _entries(data, "contract", contract_lines, file, issues):
        where = f"[[contract]] {raw['id']}" if isinstance(raw.get("id"), str) else "a [[contract]] table"
        issues += _unknown_keys(raw, CONTRACT_KEYS, where, file, line)
        ident, label = _text(raw, "id", where, file, line, issues), _text(raw, "label", where, file, line, issues)
        ends = []
        for key in ("from", "to"):
            end = _text(raw, key, where, file, line, issues)
            if end and end not in names:
                issues.append(Issue("unknown-component", file, None,
                                    f"{where}: '{key}' names {end!r}, which no [[component]] table declares",
                                    _suggest(end, names, "a [[component]] table"), line))
                end = ""
            ends.append(end)
        if claim(ident, where, line) and all(ends):
            contracts.append(Contract(ident, ends[0], ends[1], label or ident, line))
    return tuple(components), tuple(contracts), issues


def component_issues(nodes: Iterable[Node], components: tuple[Component, ...], contracts: tuple[Contract, ...],
                     *, file: str) -> list[Issue]:
    """Problems with the ``component`` field of ``nodes``: a kind it does not apply to, an unknown id."""
    known = [c.id for c in components] + [c.id for c in contracts]
    issues = []
    for node in nodes:
        if not node.components:
            continue
        if node.kind and node.kind not in COMPONENT_NODE_KINDS:
            issues.append(Issue("component-kind", file, node.id,
                                f"'component' applies to goals, strategies and solutions, not to a {node.kind}",
                                "move 'component' to the claim or solution this node frames", node.line))
            continue
        for name in node.components:
            if name in known:
                continue
            if not known:
                fix = (f'declare it: [[component]] id = "{name}" label = "..." (a case without '
                       "[[component]] tables gets a diagram derived from its graph, and no node names a component)")
            else:
                fix = _suggest(name, known, "a [[component]] or [[contract]] table")
            issues.append(Issue("unknown-component", file, node.id,
                                f"component {name!r} is not declared", fix, node.line))
    return issues


def _suggest(name: str, known: list[str], table: str) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        return f"did you mean '{close[0]}'?"
    shown = ", ".join(sorted(known)[:12]) or "none"
    return f"declare {name!r} in {table}, or name one that is declared: {shown}"
