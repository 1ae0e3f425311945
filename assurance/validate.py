"""Structural checks of a case: ids, edges, cycles, top claims, development and policies.

Every finding is an :class:`~assurance.issues.Issue` naming the file, the node and the fix;
an empty list means the case is valid. Codes are listed in ``docs/case-format.md``.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from typing import Iterable

from assurance.case_model import Case, Node
from assurance.generators import PlanItem, expand_case
from assurance.graph import AssuranceGraph
from assurance.ids import CATEGORIES, CONTEXT_KINDS, NODE_KINDS, SUPPORT_KINDS, dot_safety_problem
from assurance.issues import CaseError, Issue

__all__ = ["validate_case", "subject_problem", "TRUSTED_CATEGORY"]

TRUSTED_CATEGORY = "trusted_contract_translation"


def subject_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not a valid subject glob, or ``None``.

    >>> subject_problem("code:kernels/*.py") is None, subject_problem("/etc/passwd") is not None
    (True, True)
    """
    if pattern in ("deployment", "model"):
        return None
    if not pattern.startswith("code:"):
        return "is not 'deployment', 'model' or 'code:<glob relative to the project root>'"
    path = pattern[len("code:"):]
    if not path or path.startswith("/") or ".." in path.split("/") or "\\" in path:
        return "must be a relative posix glob inside the project, e.g. code:kernels/*.py"
    return None


def validate_case(case: Case, *, plan_items: Iterable[PlanItem] | None = None) -> list[Issue]:
    """Every structural problem of ``case`` (expanded over ``plan_items`` or a sample entry)."""
    if not case.is_expanded:
        try:
            case = expand_case(case, plan_items)
        except CaseError as exc:
            return exc.issues
    return _Checker(case).run()


class _Checker:
    def __init__(self, case: Case) -> None:
        self.case = case
        self.file = case.location
        self.issues: list[Issue] = []

    def add(self, code: str, node: Node | None, message: str, fix: str) -> None:
        self.issues.append(Issue(code, self.file, node.id if node else None, message, fix, node.line if node else 0))

    def run(self) -> list[Issue]:
        self._ids()
        for node in self.case.nodes:
            self._node(node)
        self._obligations()
        self._generators()
        graph = AssuranceGraph.from_case(self.case)
        cycle = graph.find_cycle()
        if cycle:
            self.add("cycle", self.case.node(cycle[0]), f"cycle: {' -> '.join(cycle)}",
                     "remove one of these edges; a claim cannot rest on itself")
        self._tops(graph)
        self._development(graph)
        return sorted(self.issues, key=lambda i: (i.line, i.node or "", i.code, i.message))

    def _ids(self) -> None:
        seen: dict[str, Node] = {}
        for node in self.case.nodes:
            problem = dot_safety_problem(node.id) if node.id else None
            if problem:
                self.add("dot-unsafe-id", node, f"id {node.id!r} {problem}",
                         f"rename it, e.g. {_suggest_id(node.id)!r}, and update every reference")
            if node.id in seen:
                self.add("duplicate-id", node, f"id {node.id!r} is also defined at line {seen[node.id].line}",
                         "give each node a unique id")
            seen.setdefault(node.id, node)

    def _ref(self, node: Node, target: str, relation: str) -> Node | None:
        if self.case.has_node(target):
            return self.case.node(target)
        close = difflib.get_close_matches(target, [n.id for n in self.case.nodes], n=1)
        hint = f"did you mean {close[0]!r}?" if close else "define that node or remove the reference"
        self.add("unknown-id", node, f"{relation} names unknown node {target!r}", hint)
        return None

    def _node(self, node: Node) -> None:
        if node.kind not in NODE_KINDS:
            self.add("bad-kind", node, f"unknown kind {node.kind!r}", f"use one of: {', '.join(NODE_KINDS)}")
            return
        if node.supported_by and node.kind not in ("goal", "strategy"):
            self.add("bad-edge", node, f"a {node.kind} cannot be supported by other nodes",
                     "move supported_by to the goal or strategy this node supports")
        for target in node.supported_by:
            child = self._ref(node, target, "supported_by")
            if child and child.kind not in SUPPORT_KINDS:
                self.add("bad-edge", node, f"supported_by names the {child.kind} {child.id!r}",
                         f"list {child.id!r} under in_context_of instead")
        for target in node.in_context_of:
            ctx = self._ref(node, target, "in_context_of")
            if ctx and ctx.kind not in CONTEXT_KINDS:
                self.add("bad-edge", node, f"in_context_of names the {ctx.kind} {ctx.id!r}",
                         f"list {ctx.id!r} under supported_by, or make it a context, assumption or justification")
        if node.in_context_of and node.kind in CONTEXT_KINDS:
            self.add("bad-edge", node, f"a {node.kind} cannot itself have in_context_of",
                     "attach the context to the goal or strategy instead")
        if node.kind == "solution":
            self._solution(node)

    def _solution(self, node: Node) -> None:
        if not node.has_policy:
            self.add("no-policy", node, "solution has no evidence policy",
                     'add requires = ["kernel_proof"] (all of), any_of = ["test_result", ...], or trusted = true '
                     "with a rationale")
        for category in node.policy_categories:
            if category not in CATEGORIES:
                close = difflib.get_close_matches(category, CATEGORIES, n=1)
                fix = f"did you mean {close[0]!r}?" if close else f"use one of: {', '.join(CATEGORIES)}"
                self.add("unknown-category", node, f"unknown evidence category {category!r}", fix)
        if TRUSTED_CATEGORY in node.policy_categories and not node.is_trusted:
            self.add("trusted-category", node, f"{TRUSTED_CATEGORY} evidence can only discharge a trusted item",
                     "set trusted = true with a rationale, or drop the category")
        if node.is_trusted and not node.rationale.strip():
            self.add("trusted-rationale", node, "trusted item has no rationale",
                     'add rationale = "why it is acceptable to take this on trust"')
        if node.rationale and not node.is_trusted:
            self.add("trusted-rationale", node, "rationale given on an item that is not trusted",
                     "set trusted = true or remove the rationale")
        for obligation in node.obligations:
            problem = dot_safety_problem(obligation)
            if problem:
                self.add("dot-unsafe-id", node, f"obligation id {obligation!r} {problem}",
                         f"rename it, e.g. {_suggest_id(obligation)!r}")
        for pattern in node.subjects:
            problem = subject_problem(pattern)
            if problem:
                self.add("bad-subject", node, f"subject {pattern!r} {problem}",
                         "use 'deployment', 'model' or 'code:<glob>' such as code:kernels/*.py")

    def _obligations(self) -> None:
        owners: dict[str, list[Node]] = defaultdict(list)
        for node in self.case.nodes:
            for obligation in node.obligations if node.kind == "solution" else ():
                owners[obligation].append(node)
        for obligation, nodes in sorted(owners.items()):
            for node in nodes[1:]:
                self.add("duplicate-obligation", node,
                         f"obligation {obligation!r} is also covered by {nodes[0].id!r}",
                         "give each obligation to one solution; share the solution node instead")

    def _generators(self) -> None:
        for gen in self.case.generators:
            if not self.case.has_node(gen.parent):
                self.issues.append(Issue("unknown-id", self.file, gen.id, f"generator parent {gen.parent!r} is not a node",
                                         "set parent to the goal the generated nodes support", gen.line))
            elif self.case.node(gen.parent).kind not in ("goal", "strategy"):
                self.issues.append(Issue("bad-edge", self.file, gen.id,
                                         f"generator parent {gen.parent!r} is a {self.case.node(gen.parent).kind}",
                                         "attach generated nodes to a goal or strategy", gen.line))

    def _tops(self, graph: AssuranceGraph) -> None:
        top = self.case.top
        if not self.case.has_node(top):
            self.issues.append(Issue("unknown-id", self.file, None, f"[case] top names unknown node {top!r}",
                                     "set top to the id of the case's primary goal"))
        elif self.case.node(top).kind != "goal":
            self.add("top-not-goal", self.case.node(top), f"[case] top is a {self.case.node(top).kind}",
                     "set top to a goal")
        for root in graph.roots():
            node = self.case.node(root)
            if node.kind != "goal":
                self.add("top-not-goal", node, f"this {node.kind} supports nothing, so it is a top node but not a goal",
                         "attach it to a claim with supported_by/in_context_of, or remove it")
        if self.case.has_node(top) and top not in graph.roots():
            self.add("top-not-goal", self.case.node(top), "[case] top is supported by another node, so it is not a top claim",
                     "set top to a goal that no other node lists")

    def _development(self, graph: AssuranceGraph) -> None:
        generated_parents = {g.parent for g in self.case.generators}
        for node in self.case.nodes:
            if node.kind not in ("goal", "strategy") or node.id not in graph:
                continue
            has_support = bool(node.supported_by) or node.id in generated_parents
            if node.is_undeveloped and has_support:
                self.add("undeveloped", node, "goal is marked undeveloped but has supporting nodes",
                         "remove undeveloped = true, or remove its supported_by")
            elif not has_support and not node.is_undeveloped:
                fix = ("add supported_by, or mark it undeveloped = true" if node.kind == "goal"
                       else "add supported_by goals or solutions")
                self.add("undeveloped", node, f"{node.kind} is neither developed nor marked undeveloped", fix)


def _suggest_id(value: str) -> str:
    cleaned = "".join(c if c.isascii() and (c.isalnum() or c in "_.-") else "_" for c in value).strip("_")
    if not cleaned or not cleaned[0].isalpha():
        cleaned = "n_" + cleaned
    return cleaned
