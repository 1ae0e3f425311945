"""Programmatic dependent launch: before the grid-dependency wait, only immutable tensors are read.

A kernel launched with PDL (its plan entry's constexpr PDL, which the launch wrapper turns into
Triton's ``launch_pdl``) may start while the previous launch on the stream still runs; only its
first ``tl.extra.cuda.gdc_wait()`` orders it after that launch's writes. So every live access
before that wait must be a load of a tensor the contract marks ``immutable`` (model weights, which
no launch of a forward writes); any other is REFUTED with a program and element that makes it.
A PDL launch that never waits has all of its accesses before the wait. ``immutable`` is a
premise of the contract, trusted like its relations.
"""

from __future__ import annotations

import z3

from proofs.problem import Launch, Problem
from proofs.tir import AX

__all__ = ["check_pdl"]


def check_pdl(prob: Problem, launch: Launch) -> None:
    """Prove that no live access of a PDL launch but an immutable load precedes its wait (raises on failure)."""
    ir = launch.ir
    if not ir.constexprs.get("PDL"):
        return
    waited = ir.pdl_wait is not None
    before = ir.accesses[:ir.pdl_wait] if waited else ir.accesses
    wait = f"the grid-dependency wait at line {ir.pdl_line}" if waited else "any grid-dependency wait (there is none)"
    for acc in before:
        spec = prob.contract.tensors[acc.tensor]
        if acc.kind == "load" and spec.immutable:
            premise = f"{acc.tensor} is not written while a launch of the plan runs (contract: immutable)"
            if premise not in prob.premises_used:
                prob.premises_used.append(premise)
            continue
        lanes = [z3.And(AX[k] >= 0, AX[k] < n) for k, n in enumerate(acc.shape) if n != 1]
        with prob.ctx.assume(*lanes, *[ir.loops[i].in_range() for i in acc.loops]):
            live = acc.mask if acc.mask is not None else z3.BoolVal(True)
            prob.ctx.require(z3.Not(live), pass_name="pdl",
                             what=f"launch {launch.run}: the {acc.kind} of {acc.tensor} at line {acc.line} "
                                  f"comes before {wait}, so it may see the previous launch unfinished",
                             line=acc.line)
