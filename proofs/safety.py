"""Single-launch safety: every live access in bounds, no 32-bit wrap-around, valid hints.

For each load/store site of one launch, over all programs, loop iterations and tile elements:
a live element's address splits into logical indices that lie within the tensor's shape.
Integer intermediates computed in 32 bits must not wrap: linear ones are checked directly;
products with strides are bounded through the layout split and the premise that every
tensor's element extent fits in 32 bits (so the query stays linear). Masks and loop bounds are
evaluated on all elements, so their intermediates are checked without the mask.
"""

from __future__ import annotations

import z3

from proofs.errors import Unsupported
from proofs.tlmemory import layout_problem
from proofs.layout import decompose
from proofs.problem import Launch, Problem
from proofs.smt import I32, children
from proofs.wrapper import EXTENTS
from proofs.tir import AX

__all__ = ["check_safety"]


def _subterms32(term: z3.ExprRef | None, widths: dict) -> list[tuple[z3.ArithRef, z3.BoolRef | None]]:
    """32-bit intermediates of ``term`` with the condition under which their value matters.

    A factor of a product matters only where the other factors are non-zero: the closed form
    ``init + it*delta`` of a pointer increment does not use ``delta`` in the first iteration.
    """
    if term is None:
        return []
    out, seen, todo = [], set(), [(term, None)]
    while todo:
        t, guard = todo.pop()
        key = (t.get_id(), None if guard is None else guard.get_id())
        if key in seen:
            continue
        seen.add(key)
        if widths.get(t.get_id(), (0,))[0] == 32 and not z3.is_int_value(t):
            out.append((t, guard))
        kids = children(t)
        if z3.is_mul(t) and len(kids) == 2:
            for mine, other in ((kids[0], kids[1]), (kids[1], kids[0])):
                g = other != 0 if not z3.is_int_value(other) else None
                todo.append((mine, g if guard is None else z3.And(guard, g) if g is not None else guard))
            continue
        todo.extend((k, guard) for k in kids)
    return out


def _no_wrap(prob: Problem, launch: Launch, spec, terms: list) -> z3.BoolRef:
    """A linear condition implying that none of ``terms`` leaves the 32-bit range."""
    parts = []
    for t, guard in terms:
        cond = _no_wrap_one(prob, launch, spec, t)
        parts.append(cond if guard is None else z3.Implies(guard, cond))
    return z3.And(*parts)


def _no_wrap_one(prob: Problem, launch: Launch, spec, t: z3.ArithRef) -> z3.BoolRef:
    """Either the term is provably in range, or it is a partial offset of an in-bounds element."""
    options = [I32(t)]
    idx = decompose(t, launch.strides(spec)) if spec is not None and prob.contract.i32_extents else None
    if idx is not None:
        # t = Σ idx_k * stride_k with 0 <= idx_k < dim_k lies in [0, extent), and extent < 2**31.
        parts = []
        for i, d in zip(idx, launch.dims(spec)):
            if not (z3.is_int_value(i) and i.as_long() == 0):
                parts += [i >= 0, i < d]
        options.append(z3.And(*parts))
        note = EXTENTS
        if note not in prob.premises_used:
            prob.premises_used.append(note)
    return z3.Or(*options) if options else I32(t)


def _lane_ranges(shape: tuple) -> list:
    return [z3.And(AX[k] >= 0, AX[k] < n) for k, n in enumerate(shape) if n != 1]


def check_safety(prob: Problem, launch: Launch) -> None:
    """Prove bounds, 32-bit range and hint obligations of one launch (raises on failure)."""
    ctx, ir, run = prob.ctx, launch.ir, launch.run
    for loop in ir.loops.values():
        enclosing = [ir.loops[i].in_range() for i in _enclosing(ir, loop.parent)]
        with ctx.assume(*enclosing):
            if loop.step_const is None:
                ctx.require(loop.step > 0, pass_name="safety", what=f"launch {run}: loop step at line {loop.line} "
                            "is positive", line=loop.line)
            bounds = _subterms32(loop.lo, ir.widths) + _subterms32(loop.hi, ir.widths)
            bounds += [(loop.lo, None), (loop.hi, None)]
            ctx.require(_no_wrap(prob, launch, None, bounds), pass_name="safety",
                        what=f"launch {run}: loop bounds at line {loop.line} fit in 32 bits", line=loop.line)
    for acc in ir.accesses:
        spec = prob.contract.tensors[acc.tensor]
        where = f"launch {run}: {acc.kind} of {acc.tensor} at line {acc.line}"
        with ctx.assume(*_lane_ranges(acc.shape), *[ir.loops[i].in_range() for i in acc.loops]):
            idx = decompose(acc.offset, launch.strides(spec))
            if idx is None:
                raise Unsupported("address", acc.line, layout_problem(acc.tensor, acc.offset, spec.strides))
            inb = z3.And(*[z3.And(i >= 0, i < d) for i, d in zip(idx, launch.dims(spec))])
            live = acc.mask if acc.mask is not None else z3.BoolVal(True)
            masks = _subterms32(acc.mask, ir.widths)
            goals = [(z3.Implies(live, inb), "safety", f"{where} stays in bounds"),
                     (z3.Implies(live, _no_wrap(prob, launch, spec, _subterms32(acc.offset, ir.widths))), "safety",
                      f"{where}: 32-bit address arithmetic does not wrap")]
            if masks:
                goals.append((_no_wrap(prob, launch, None, masks), "safety",
                              f"{where}: 32-bit mask arithmetic does not wrap"))
            ctx.require_all(goals, acc.line)
    for term, multiple, line, shape, loops, kind in ir.hints:
        if kind != "multiple_of":
            prob.premises_used.append(f"compiler hint tl.{kind} at line {line} holds (trusted)")
            continue
        with ctx.assume(*_lane_ranges(shape), *[ir.loops[i].in_range() for i in loops]):
            ctx.require(term % multiple == 0, pass_name="safety",
                        what=f"launch {run}: tl.multiple_of({multiple}) at line {line} holds", line=line)


def _enclosing(ir, loop_id: int | None) -> list[int]:
    out = []
    while loop_id is not None:
        out.append(loop_id)
        loop_id = ir.loops[loop_id].parent
    return out
