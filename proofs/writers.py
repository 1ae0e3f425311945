"""Writers of the selected output element: existence, uniqueness, and the relational start.

The selected element of an output tensor is the contract's ``output = [...]`` index, one
expression (or a free shared index ``*``) per dimension, evaluated in each launch. A *writer
instance* is (program id, iterations of enclosing loops, element of the stored tile) with a
live mask whose address is that element. Each launch must have at least one writer and no two
distinct ones (no overwrite, no race, no accumulation of partial results); then the stored
values of the two launches' writers are paired by :class:`~proofs.walk.Walker`.
"""

from __future__ import annotations

from contextlib import ExitStack

import z3

from proofs.contract import TensorSpec
from proofs.errors import Unsupported
from proofs.tlmemory import layout_problem
from proofs.layout import decompose
from proofs.problem import Launch, Problem
from proofs.tir import Access, FNode, IntVal, lanes_subst
from proofs.smt import exists
from proofs.witness import guesses

__all__ = ["selected_element", "Writer", "writer", "check_writers", "pair_writers"]


def selected_element(prob: Problem, spec: TensorSpec) -> tuple[tuple, tuple, list]:
    """(index in A, index in B, premises) of the selected element of output ``spec``."""
    sel_a, sel_b, premises = [], [], []
    dims_a, dims_b = prob.A.dims(spec), prob.B.dims(spec)
    for k, e in enumerate(spec.output):
        if e == "*":
            v = z3.Int(f"{spec.name}[{k}]")
            sel_a.append(v)
            sel_b.append(v)
            premises += [v >= 0, v < dims_a[k], v < dims_b[k]]
        else:
            sel_a.append(prob.A.names.expr(e))
            sel_b.append(prob.B.names.expr(e))
    return tuple(sel_a), tuple(sel_b), premises


class Writer:
    """One writer instance of a store site in one launch, with its own variables."""

    def __init__(self, prob: Problem, launch: Launch, access: Access, sel: tuple, tag: str) -> None:
        self.access, self.launch = access, launch
        ir = launch.ir
        spec = prob.contract.tensors[access.tensor]
        self.lanes = tuple(z3.Int(f"lane{k}{tag}@{launch.run}") for k in range(len(access.shape)))
        renames = []
        if tag:
            renames = [(v, z3.Int(str(v).replace("@", tag + "@"))) for v in
                       list(ir.pids) + [ir.loops[i].it for i in access.loops]]
        self.vars = [z3.substitute(v, *renames) if renames else v
                     for v in list(ir.pids) + [ir.loops[i].it for i in access.loops]] + list(self.lanes)
        idx = decompose(access.offset, launch.strides(spec))
        if idx is None:
            raise Unsupported("store address", access.line, layout_problem(access.tensor, access.offset, spec.strides))

        def inst(t: z3.ExprRef) -> z3.ExprRef:
            t = lanes_subst(t, access.shape, self.lanes)
            return z3.substitute(t, *renames) if renames else t

        parts = [z3.And(v >= 0, v < n) for v, n in zip(self.lanes, access.shape)]
        parts += [inst(z3.And(p >= 0, p < g)) for p, g in zip(ir.pids, ir.grid)]
        parts += [inst(ir.loops[i].in_range()) for i in access.loops]
        if access.mask is not None:
            parts.append(inst(access.mask))
        self.equations = [(inst(i), s) for i, s in zip(idx, sel)]
        parts += [i == s for i, s in self.equations]
        self.constraint = z3.And(*parts)
        self.lane_sizes = {str(v): n for v, n in zip(self.lanes, access.shape)}
        self.value = access.value

    def differs(self, other: "Writer") -> z3.BoolRef:
        return z3.Or(*[a != b for a, b in zip(self.vars, other.vars)])


def writer(prob: Problem, launch: Launch, access: Access, sel: tuple, tag: str = "") -> Writer:
    return Writer(prob, launch, access, sel, tag)


def check_writers(prob: Problem, spec: TensorSpec, launch: Launch, sel: tuple) -> list[Access]:
    """Prove existence and uniqueness of the selected element's writer in one launch."""
    ctx = prob.ctx
    sites = [a for a in launch.ir.stores if a.tensor == spec.name]
    if not sites:
        raise Unsupported("output", 0, f"the kernel never stores to {spec.name}")
    run = launch.run
    for i, s1 in enumerate(sites):
        for s2 in sites[i:]:
            w1, w2 = writer(prob, launch, s1, sel), writer(prob, launch, s2, sel, tag="'")
            line = s2.line
            ob = ctx.prove(z3.Not(z3.And(w1.constraint, w2.constraint, w1.differs(w2))), pass_name="writers",
                           what=f"launch {run}: at most one writer of the selected {spec.name} element "
                                f"(stores at lines {s1.line} and {s2.line})", line=line)
            if ob.status != "proved":
                from proofs.smt import Failed
                kind = "atomic accumulation: " if "atomic" in (s1.kind, s2.kind) else ""
                raise Failed(ob, f"{kind}{ob.what} failed")
    writers = [writer(prob, launch, s, sel) for s in sites]
    what = f"launch {run}: the selected {spec.name} element is written"
    groups = [launch.names.group(g) for g in prob.contract.groups]
    found = False
    for w in writers:
        for witness in guesses(w.equations, w.vars, w.lane_sizes, groups):
            ob = ctx.prove(z3.substitute(w.constraint, *witness), pass_name="writers",
                           what=f"{what} (by the store at line {w.access.line})", line=w.access.line)
            if ob.status == "proved":
                found = True
                break
            ctx.obligations.pop()  # only a guess; the quantified query below decides
        if found:
            break
    else:
        written = z3.Or(*[exists(w.vars, w.constraint) for w in writers])
        ctx.require(written, pass_name="writers", what=what, line=sites[0].line)
    atomics = [s for s in sites if s.kind == "atomic"]
    if atomics:
        raise Unsupported("atomic read-modify-write", atomics[0].line,
                          "a unique atomic writer still adds to the output's previous contents")
    return sites


def pair_writers(prob: Problem, walker, spec: TensorSpec, sites_a: list, sites_b: list, sel_a, sel_b) -> None:
    """Pair the stored values of every possible (writer in A, writer in B) combination."""
    ctx = prob.ctx
    for sa in sites_a:
        for sb in sites_b:
            wa, wb = writer(prob, prob.A, sa, sel_a), writer(prob, prob.B, sb, sel_b)
            both = z3.And(wa.constraint, wb.constraint)
            if not ctx.possible(both):
                continue
            with ExitStack() as stack:
                stack.enter_context(ctx.assume(both))
                va, vb = wa.value, wb.value
                if isinstance(va, FNode) and isinstance(vb, FNode):
                    walker.pair(va, wa.lanes, vb, wb.lanes)
                elif isinstance(va, IntVal) and isinstance(vb, IntVal):
                    from proofs.relate import ints_related

                    ta, tb = lanes_subst(va.term, va.shape, wa.lanes), lanes_subst(vb.term, vb.shape, wb.lanes)
                    with ints_related(walker, [(ta, tb)], sa.line):
                        ctx.require(ta == tb, pass_name="pairing", what=f"stored integer at line {sa.line} is equal",
                                    line=sa.line)
                else:
                    raise walker.fail("pairing", f"stored values at lines {sa.line}/{sb.line} differ in kind", sa.line)
