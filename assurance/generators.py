"""Node generators: one case node per entry of the sealed kernel plan.

A ``[[generate]]`` table holds a node template whose strings may use ``{kernel}``, ``{key}``,
``{source_file}`` and ``{digest}``; expanding it over the plan adds one node per matching entry
and attaches it to the generator's parent goal, so a new kernel gets its obligation without an
edit to the case.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, replace
from typing import Any, Iterable

from assurance.case_loader import build_node
from assurance.case_model import Case, Generator, Node
from assurance.ids import NodeId
from assurance.issues import CaseError, Issue

__all__ = ["PlanItem", "PLACEHOLDERS", "SAMPLE_ITEM", "expand_case", "generate_nodes"]

PLACEHOLDERS = ("kernel", "key", "source_file", "digest")


@dataclass(frozen=True, slots=True)
class PlanItem:
    """What a generator needs from one sealed-plan entry."""

    kernel: str  # kernel name, e.g. "matmul"
    key: str  # DOT-safe entry key, unique in the plan, e.g. "matmul_n256_k64"
    source_file: str  # kernel source, posix path relative to the project root
    digest: str  # the entry's digest in the sealed plan

    def __post_init__(self) -> None:
        if not self.kernel or not self.key or not self.source_file:
            raise ValueError(f"plan item needs a kernel, a key and a source file, got {self!r}")


# Used to check generator templates when no plan is at hand (its key is made unique per generator).
SAMPLE_ITEM = PlanItem(kernel="sample", key="sample", source_file="kernels/sample.py",
                       digest="sha256:" + "0" * 64)


class _Strict(dict):
    def __missing__(self, key: str) -> str:
        raise KeyError(key)


def _fill(value: Any, values: dict[str, str]) -> Any:
    if isinstance(value, str):
        return value.format_map(_Strict(values))
    if isinstance(value, list):
        return [_fill(v, values) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, values) for k, v in value.items()}
    return value


def _matches(generator: Generator, item: PlanItem) -> bool:
    included = not generator.match or any(fnmatch.fnmatchcase(item.kernel, p) for p in generator.match)
    return included and not any(fnmatch.fnmatchcase(item.kernel, p) for p in generator.exclude)


def generate_nodes(generator: Generator, items: Iterable[PlanItem], *, file: str,
                   ignore_match: bool = False) -> list[Node]:
    """The nodes ``generator`` makes for ``items``; raises :class:`CaseError` on a bad template."""
    nodes = []
    for item in items:
        if not ignore_match and not _matches(generator, item):
            continue
        values = {"kernel": item.kernel, "key": item.key, "source_file": item.source_file, "digest": item.digest}
        try:
            raw = _fill(dict(generator.template), values)
        except (KeyError, IndexError, ValueError) as exc:
            raise CaseError([Issue(
                "generator-template", file, generator.id,
                f"template uses an unknown or malformed placeholder ({exc})",
                f"use only {', '.join('{' + p + '}' for p in PLACEHOLDERS)}; write literal braces as {{{{ }}}}",
                generator.line)]) from None
        nodes.append(build_node(raw, file=file, line=generator.line, generated_by=generator.id))
    return nodes


def expand_case(case: Case, items: Iterable[PlanItem] | None, *, label: str = "") -> Case:
    """``case`` with every generator applied to ``items`` (the sealed plan's entries).

    With ``items=None`` (no plan at hand) each generator is applied once to :data:`SAMPLE_ITEM`
    (key ``sample<N>`` for the N-th generator), so validation still checks its template; such a
    case is for checking only.
    """
    items = tuple(items) if items is not None else None
    file = case.location
    generated: dict[str, list[NodeId]] = {}
    new_nodes: list[Node] = []
    issues: list[Issue] = []
    for number, generator in enumerate(case.generators, start=1):
        sample = replace(SAMPLE_ITEM, key=f"{SAMPLE_ITEM.key}{number}")
        try:
            nodes = generate_nodes(generator, items if items is not None else (sample,), file=file,
                                   ignore_match=items is None)
        except CaseError as exc:
            issues.extend(exc.issues)
            continue
        new_nodes.extend(nodes)
        generated.setdefault(generator.parent, []).extend(n.id for n in nodes)
    if issues:
        raise CaseError(issues)
    nodes = []
    for node in case.nodes:
        extra = tuple(sorted(generated.get(node.id, ())))
        if extra:
            node = replace(node, supported_by=node.supported_by + extra)
        nodes.append(node)
    return case.with_nodes(tuple(nodes) + tuple(sorted(new_nodes, key=lambda n: n.id)), is_expanded=True,
                           plan_label=label if items is not None else "sample plan entry")

