"""Demanded loads: masks, ``other`` values and contract relations of the addresses read.

A demanded load element in launch A and its partner in launch B must have equal masks; a
masked-off demanded element needs an ``other`` value (without it the lane is undefined, i.e.
poison); a live element's address is split into logical indices (:mod:`proofs.layout`) and
must satisfy the tensor's relation: ``equal`` (same indices), ``index`` (per-dimension index
expressions, e.g. the selected row), or ``paged`` (same logical position through each launch's
page table). Integer loads (token ids, positions, page tables) occur inside integer terms as
uninterpreted contents; :func:`ints_related` pairs them and assumes their values equal once
their addresses are related.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import z3

from proofs.contract import TensorSpec, index_bound
from proofs.errors import Unsupported
from proofs.tlmemory import layout_problem
from proofs.layout import decompose
from proofs.smt import children
from proofs.tir import FNode, lanes_subst
from proofs.z3state import on_new_context

__all__ = ["pair_load", "ints_related", "related_indices"]


_PAIRS: dict[tuple, tuple] = {}
on_new_context(_PAIRS.clear)


def _apps_pairs(ta: z3.ExprRef, tb: z3.ExprRef) -> list | None:
    """Corresponding tensor-content applications of two same-shaped terms, with the ``If``
    conditions (of A and of B) under which each occurs; None if the terms differ in shape."""
    key = (ta.get_id(), tb.get_id())
    hit = _PAIRS.get(key)
    if hit is None:
        hit = _PAIRS[key] = (ta, tb, _apps_pairs_uncached(ta, tb))  # keeps the keyed terms alive
    return hit[2]


def _apps_pairs_uncached(ta: z3.ExprRef, tb: z3.ExprRef) -> list | None:
    if not _find_apps(ta) and not _find_apps(tb):
        return []
    if ta.num_args() != tb.num_args() or (ta.num_args() and ta.decl().kind() != tb.decl().kind()):
        return None
    out = []
    if z3.is_app(ta) and ta.num_args() and ta.decl().kind() == z3.Z3_OP_UNINTERPRETED:
        na, nb = ta.decl().name(), tb.decl().name()
        if na.rpartition("@")[0] != nb.rpartition("@")[0]:
            return None
        if "@" in na and not na.startswith(("undef", "opaque")):
            out.append((ta, tb, (), ()))
    if z3.is_app_of(ta, z3.Z3_OP_ITE):
        c1, c2 = ta.arg(0), tb.arg(0)
        parts = [(c1, c2, (), ()), (ta.arg(1), tb.arg(1), (c1,), (c2,)),
                 (ta.arg(2), tb.arg(2), (z3.Not(c1),), (z3.Not(c2),))]
    else:
        parts = [(x, y, (), ()) for x, y in zip(children(ta), children(tb))]
    for x, y, pa, pb in parts:
        inner = _apps_pairs(x, y)
        if inner is None:
            return None
        out += [(a, b, pa + qa, pb + qb) for a, b, qa, qb in inner]
    return out


def related_indices(walker, spec: TensorSpec, ia: tuple, ib: tuple, line: int, what: str) -> None:
    """Require that element ``ia`` of launch A and ``ib`` of launch B are related by the contract."""
    goal = relation_goal(walker, spec, ia, ib, line, what)
    walker.ctx.require(goal, pass_name="demand", what=f"{what}: element of {spec.name} is related "
                       f"({spec.relation.kind})", line=line)


def relation_goal(walker, spec: TensorSpec, ia: tuple, ib: tuple, line: int, what: str) -> z3.BoolRef:
    """The condition under which elements ``ia`` (launch A) and ``ib`` (launch B) are related."""
    prob = walker.prob
    rel = spec.relation
    na, nb = prob.A.names, prob.B.names
    if rel.kind == "equal":
        goal = z3.And(*[x == y for x, y in zip(ia, ib)])
        prob.demand.setdefault(spec.name, "equal (identical in both launches)")
    elif rel.kind == "index":
        parts = []
        for k, e in enumerate(rel.index):
            bound = index_bound(e)
            if e == "*":
                parts.append(ia[k] == ib[k])
            elif bound is not None:
                parts += [ia[k] == ib[k], ia[k] < na.expr(bound), ib[k] < nb.expr(bound)]
            else:
                parts += [ia[k] == na.expr(e), ib[k] == nb.expr(e)]
        goal = z3.And(*parts)
        prob.demand.setdefault(spec.name, f"index [{', '.join(rel.index)}]")
    elif rel.kind == "paged":
        goal = _paged_goal(walker, spec, ia, ib, line)
        prob.demand.setdefault(spec.name, f"paged via {rel.page_table}[{rel.row}], positions < {rel.length}")
    else:
        raise walker.fail("demand", f"{what} reads {spec.name}, which the contract does not relate between "
                          "launches (relation none)", line)
    return goal


def _paged_goal(walker, spec: TensorSpec, ia: tuple, ib: tuple, line: int) -> z3.BoolRef:
    rel = spec.relation
    parts, positions = [], []
    for names, idx in ((walker.prob.A.names, ia), (walker.prob.B.names, ib)):
        page_size = names.expr(rel.page_size)
        table = names.uf(rel.page_table)
        slot = idx[0]
        apps = [t for t in _find_apps(slot) if t.decl().eq(table)]
        if len(apps) != 1 or apps[0].num_args() != 2:
            raise Unsupported("paged access", line, f"address of {spec.name} does not read {rel.page_table} once")
        page_app = apps[0]
        row, page_idx = page_app.arg(0), page_app.arg(1)
        if rel.layout == "slot":
            within = z3.simplify(slot - page_size * page_app)
            rest = idx[1:]
        else:
            parts.append(idx[0] == page_app)
            within, rest = idx[1], idx[2:]
        parts += [row == names.expr(rel.row), within >= 0, within < page_size]
        pos = page_idx * page_size + within
        parts += [pos >= 0, pos < names.expr(rel.length)]
        positions.append((pos, rest))
    (pa, ra), (pb, rb) = positions
    parts.append(pa == pb)
    parts += [x == y for x, y in zip(ra, rb)]
    return z3.And(*parts)


def _find_apps(term: z3.ExprRef) -> list:
    from proofs.smt import uf_apps

    return uf_apps(term)


@contextmanager
def ints_related(walker, pairs: list, line: int) -> Iterator[None]:
    """Relate the integer-tensor contents inside corresponding terms, then assume them equal."""
    found: list = []
    for ta, tb in pairs:
        inner = _apps_pairs(ta, tb)
        if inner is None:
            raise walker.fail("pairing", f"integer terms at line {line} differ in structure between launches", line)
        found += inner
    premises = []
    for app_a, app_b, pa, pb in found:
        name = app_a.decl().name().rpartition("@")[0]
        spec = walker.prob.contract.tensors[name]
        if spec.relation.kind in ("none", "paged"):
            continue  # e.g. page tables: their contents differ; relations go through views
        path = z3.And(*pa, *pb)
        with walker.ctx.assume(path):
            related_indices(walker, spec, tuple(app_a.children()), tuple(app_b.children()), line,
                            f"integer load of {name}")
        premises.append(z3.Implies(path, app_a == app_b))
    with walker.ctx.assume(*premises):
        yield


def pair_load(walker, a: FNode, la: tuple, b: FNode, lb: tuple) -> None:
    """Pair a demanded float load element of launch A with one of launch B."""
    ctx, prob = walker.ctx, walker.prob
    tensor = a.attrs[0]
    spec = prob.contract.tensors[tensor]
    off_a, off_b = lanes_subst(a.data["offset"], a.shape, la), lanes_subst(b.data["offset"], b.shape, lb)
    ma = lanes_subst(a.data["mask"], a.shape, la) if a.data["mask"] is not None else z3.BoolVal(True)
    mb = lanes_subst(b.data["mask"], b.shape, lb) if b.data["mask"] is not None else z3.BoolVal(True)
    what = f"load of {tensor} at line {a.line}"
    writes = [s.line for s in prob.A.ir.stores if s.tensor == tensor]
    if writes:
        raise Unsupported("load from a tensor the kernel also writes", a.line,
                          f"{tensor} is stored at line {writes[0]}; another program's write could be read")
    ia, ib = decompose(off_a, prob.A.strides(spec)), decompose(off_b, prob.B.strides(spec))
    if ia is None or ib is None:
        raise Unsupported("load address", a.line, layout_problem(tensor, a.data["offset"], spec.strides))
    with ints_related(walker, [(ma, mb), (off_a, off_b)], a.line):
        goals = [(ma == mb, "pairing", f"{what}: masks are equal")]
        if not a.data["access"].has_other:
            goals.append((ma, "demand", f"{what}: no masked-off element is demanded (the load has no other=, "
                                        "so such elements are undefined)"))
        goals.append((z3.Implies(ma, relation_goal(walker, spec, ia, ib, a.line, what)), "demand",
                      f"{what}: element of {spec.name} is related ({spec.relation.kind})"))
        ctx.require_all(goals, a.line)
        if a.data["access"].has_other and a.args and not z3.is_true(ma):
            other = a.args[0]
            while other.op == "view":
                other = other.args[0]
            if other.op == "const" or ctx.possible(z3.Not(ma)):  # a constant pairs without queries
                with ctx.assume(z3.Not(ma)):
                    walker.pair(a.args[0], la, b.args[0], lb)
