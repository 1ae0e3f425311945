"""The components the trust-boundary diagram draws, the contracts between them, and which node is about which.

A case that declares ``[[component]]`` and ``[[contract]]`` tables gets exactly those. A solution
is about what its ``component`` field names, else what its nearest claim above names (depth first
from the top claims, in case order: the first path wins), else it lands in an "unassigned"
component drawn only when used. A kernel proof is about a kernel and is the verifier's contract
with it, so a case names both for it.

A case without the tables gets a layout derived from its graph: one component per branch of the
argument (the goal and strategy children of the top claim, or of the first claim down from it whose
support is more than a single goal or strategy; one per top claim when there are several), and one
component named after the case for solutions outside every branch; each
trusted solution is a component of its own, and the component above it relies on it through a
contract. Goals and strategies are attached to nothing themselves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from assurance.render.model import ComponentModel, ContractModel, NodeModel, ScopeModel

__all__ = ["Layout", "layout", "region_of", "REGIONS", "UNASSIGNED"]

# Regions from strongest to weakest assurance, then the two without support.
REGIONS = {
    "verified": "Verified (kernel proofs)",
    "runtime-checked": "Checked at run time",
    "tested": "Tested",
    "trusted": "Trusted",
    "unsupported": "Unsupported (failed, stale or missing)",
    "outside": "Outside the case (implicitly trusted)",
}
UNASSIGNED = ComponentModel("unassigned", "Not assigned to a component")
_CLAIM_KINDS = ("goal", "strategy")
# DOT ids the diagram uses itself; a component whose id would clash gets a suffix.
_RESERVED = frozenset({"focus_claim", "node", "edge", "graph", "digraph", "subgraph", "strict"})


@dataclass(frozen=True, slots=True)
class Layout:
    """What one diagram draws; every key is a DOT id (ASCII letters, digits and '_')."""

    components: tuple[ComponentModel, ...]
    contracts: tuple[ContractModel, ...]
    attached: dict[str, tuple[str, ...]] = field(default_factory=dict)  # node id -> component/contract keys
    is_derived: bool = False


class _Keys:
    """Case ids to unique DOT ids: ``.`` and ``-`` become ``_``; clashes get ``_2``, ``_3``…"""

    def __init__(self) -> None:
        self.ids: dict[str, str] = {}
        self.used: set[str] = set(_RESERVED)

    def __call__(self, name: str) -> str:
        if name not in self.ids:
            base = re.sub(r"[^A-Za-z0-9_]", "_", name)
            base = base if re.match(r"[A-Za-z]", base) and not base.startswith("legend") else f"c_{base}"
            key, n = base, 1
            while key in self.used:
                n += 1
                key = f"{base}_{n}"
            self.used.add(key)
            self.ids[name] = key
        return self.ids[name]


def _walk(start: str, by_id: dict[str, NodeModel], seen: set[str] | None = None) -> list[tuple[str, str]]:
    """(node id, id of its parent on the first path) in depth-first preorder from ``start``.

    Nodes in ``seen`` are skipped, and every node visited is added to it.
    """
    order, stack = [], [(start, "")]
    seen = set() if seen is None else seen
    while stack:
        node_id, parent = stack.pop()
        if node_id in seen or node_id not in by_id:
            continue
        seen.add(node_id)
        order.append((node_id, parent))
        stack.extend((kid, node_id) for kid in reversed(by_id[node_id].children))
    return order


def _declared(scope: ScopeModel, by_id: dict[str, NodeModel]) -> Layout:
    keys = _Keys()
    components = [ComponentModel(keys(c.key), c.label) for c in scope.components]
    contracts = [ContractModel(keys(c.key), keys(c.source), keys(c.target), c.label) for c in scope.contracts]
    names: dict[str, tuple[str, ...]] = {}
    seen: set[str] = set()
    for start in (*scope.top_claims, *by_id):  # the top claims first, then whatever they do not reach
        for node_id, parent in _walk(start, by_id, seen):
            names[node_id] = by_id[node_id].components or names.get(parent, ())
    attached = {n.node_id: tuple(keys(k) for k in names.get(n.node_id, ())) or (UNASSIGNED.key,)
                for n in scope.nodes if n.kind == "solution"}
    if any(UNASSIGNED.key in v for v in attached.values()):
        components.append(ComponentModel(keys(UNASSIGNED.key), UNASSIGNED.label))
    return Layout(tuple(components), tuple(contracts), attached)


def _branch_level(scope: ScopeModel, by_id: dict[str, NodeModel]) -> list[str]:
    """The claims the derived layout draws as components (maybe none)."""
    if len(scope.top_claims) != 1:
        return [t for t in scope.top_claims if t in by_id]
    node = by_id[scope.top_claims[0]]
    while True:
        kids = [by_id[k] for k in node.children if k in by_id]
        claims = [k for k in kids if k.kind in _CLAIM_KINDS]
        if len(claims) == 1 and len(kids) == 1:
            node = claims[0]
            continue
        return [k.node_id for k in claims]


def _derived(scope: ScopeModel, by_id: dict[str, NodeModel]) -> Layout:
    keys = _Keys()
    system = ComponentModel(keys(scope.system or "system"), scope.system or "The system")
    owner: dict[str, ComponentModel] = {}  # solution id -> the component it is about (or relies on it)
    components: list[ComponentModel] = []
    for branch in _branch_level(scope, by_id):
        comp = ComponentModel(keys(branch), by_id[branch].text)
        components.append(comp)
        for node_id, _ in _walk(branch, by_id):
            owner.setdefault(node_id, comp)
    solutions = [n for n in scope.nodes if n.kind == "solution"]
    attached: dict[str, tuple[str, ...]] = {}
    contracts: list[ContractModel] = []
    trusted: list[ComponentModel] = []
    for node in solutions:
        above = owner.get(node.node_id, system)
        if node.is_trusted:
            comp = ComponentModel(keys(node.node_id), node.text)
            contract = ContractModel(keys(f"relies_on_{node.node_id}"), above.key, comp.key, f"relies on {node.node_id}")
            trusted.append(comp)
            contracts.append(contract)
            attached[node.node_id] = (comp.key, contract.key)
        else:
            attached[node.node_id] = (above.key,)
    used = {k for v in attached.values() for k in v} | {c.source for c in contracts}
    if system.key in used or not components:
        components.insert(0, system)
    return Layout(tuple(components + trusted), tuple(contracts), attached, is_derived=True)


def layout(scope: ScopeModel) -> Layout:
    """The components, contracts and attachments of ``scope``'s diagram."""
    by_id = {n.node_id: n for n in scope.nodes}
    return _declared(scope, by_id) if scope.components else _derived(scope, by_id)


_STATUS_REGION = {"verified": "verified", "runtime-checked": "runtime-checked", "tested": "tested",
                  "trusted-reviewed": "trusted", "trusted-unreviewed": "trusted"}
_REGION_RANK = ("verified", "runtime-checked", "tested", "trusted")


def region_of(statuses: list[str]) -> str:
    """The region of a component whose attached nodes have ``statuses``: the weakest support."""
    if not statuses:
        return "outside"
    regions = [_STATUS_REGION[s] for s in statuses if s in _STATUS_REGION]
    if not regions:
        return "unsupported"
    return max(regions, key=_REGION_RANK.index)
