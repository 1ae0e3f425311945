"""Backward demand and lockstep pairing: the relational product of two launches' value DAGs.

Starting from a selected output element's writer in each launch, :meth:`Walker.pair` walks
both DAGs together at *element positions* (Z3 terms). Every value-relevant operation must
match in kind, dtype, tile shape and attributes (fixed tile geometry, reduction axis, dot
precision). Integer guards must be equal on the demanded elements; the arm a guard rules out
is not demanded. Reductions and dot products pair their lanes position by position (the
order is fixed by the tile geometry), while the selected element itself may sit at different
positions in the two launches (trusted row-position independence of reduce and dot). Loads
end the walk: their demanded addresses must be related by the contract (:mod:`proofs.relate`).
Loops are handled in :mod:`proofs.loopproof`.
"""

from __future__ import annotations

import struct
from typing import Any

import z3

from proofs import relate
from proofs.errors import Unsupported
from proofs.kinds import FINITE
from proofs.problem import Problem
from proofs.smt import Failed, Obligation
from proofs.tir import FNode, lanes_subst
from proofs.z3state import on_new_context

__all__ = ["Walker", "arg_lanes", "bound_var"]

_ZERO = z3.IntVal(0)


@on_new_context
def _constants() -> None:
    global _ZERO
    _ZERO = z3.IntVal(0)


def _struct_attr(v: Any) -> Any:
    if isinstance(v, float):
        return struct.pack("<d", v)  # bitwise: keeps the sign of zero and NaN payloads apart
    if isinstance(v, tuple):
        return tuple(_struct_attr(x) for x in v)
    return v


def bound_var(tag: str, n: int, line: int = 0) -> tuple[z3.ArithRef, z3.BoolRef]:
    """A lane of a reduced (or contracted) axis, named after its source line for counterexamples."""
    k = z3.Int(f"lane@L{line}#{tag}")
    return k, z3.And(k >= 0, k < n)


def arg_lanes(node: FNode, lanes: tuple, arg_index: int, bound: z3.ArithRef | None = None) -> tuple:
    """Element position in operand ``arg_index`` of ``node`` for output position ``lanes``."""
    arg = node.args[arg_index]
    op = node.op
    if op == "view":
        amap = node.attrs[0]
        out = [_ZERO] * len(arg.shape)
        for k, src in enumerate(amap):
            if src is not None and arg.shape[src] != 1:
                out[src] = lanes[k]
        return tuple(out)
    if op == "reduce":  # (a reduction over all axes binds every lane itself, see Walker.pair_reduce)
        axis = node.attrs[1]
        return tuple(lanes[:axis]) + (bound,) + tuple(lanes[axis:])
    if op == "dot":
        i, j = lanes
        return ((i, bound), (bound, j), (i, j))[arg_index]
    return tuple(_ZERO if arg.shape[k] == 1 and node.shape[k] != 1 else lanes[k] for k in range(len(node.shape)))


class Walker:
    """Pairs launch A's value DAG with launch B's under the current solver assumptions."""

    def __init__(self, prob: Problem) -> None:
        from proofs.values import Values

        self.prob = prob
        self.ctx = prob.ctx
        self.memo: set = set()
        self.loop_proofs: dict = {}
        self.active: list = []  # loop proofs whose body is being walked (innermost last)
        self.values = Values(prob)
        self.ops = 0

    # -- failures ---------------------------------------------------------------------------
    def fail(self, pass_name: str, what: str, line: int, status: str = "refuted") -> Failed:
        model = {}
        if status == "refuted":
            model = self.ctx.model()
            if not model:
                status = "unknown"
        ob = Obligation(pass_name, what, line, status, 0.0, model)
        self.ctx.obligations.append(ob)
        return Failed(ob)

    # -- the product walk -------------------------------------------------------------------
    def pair(self, a: FNode, la: tuple, b: FNode, lb: tuple) -> None:
        """Prove that ``a`` at ``la`` in launch A equals ``b`` at ``lb`` in launch B."""
        key = (a.uid, b.uid, tuple(x.get_id() for x in la), tuple(x.get_id() for x in lb), self.ctx.key,
               tuple((id(lp), lp.cls) for lp in self.active))
        if key in self.memo:
            return
        self.ops += 1
        sa = (a.op, a.shape, a.dtype, _struct_attr(a.attrs))
        sb = (b.op, b.shape, b.dtype, _struct_attr(b.attrs))
        if sa != sb:
            raise self.fail("pairing", f"structure differs at line {a.line}: launch A has {a.op}{list(a.attrs)} "
                            f"{a.dtype}{list(a.shape)}, launch B has {b.op}{list(b.attrs)} {b.dtype}{list(b.shape)}",
                            a.line)
        handler = getattr(self, "pair_" + a.op, None)
        if handler is None:
            raise Unsupported(a.op, a.line, "not supported by the relational analysis")
        handler(a, la, b, lb)
        self.memo.add(key)  # only after success: a failed attempt may be retried differently

    def pair_args(self, a: FNode, la: tuple, b: FNode, lb: tuple, indices=None) -> None:
        for i in indices if indices is not None else range(len(a.args)):
            self.pair(a.args[i], arg_lanes(a, la, i), b.args[i], arg_lanes(b, lb, i))

    pair_unary = pair_binary = pair_cmp = pair_cast = pair_fma = pair_view = pair_fselect = pair_args

    def pair_const(self, a: FNode, la: tuple, b: FNode, lb: tuple) -> None:
        return None  # values compared bitwise by the structural check

    def pair_param(self, a: FNode, la: tuple, b: FNode, lb: tuple) -> None:
        name, kind = a.attrs
        if kind != "same":
            raise self.fail("pairing", f"float argument {name} may differ between launches (contract: batch)", a.line)

    def pair_fromint(self, a: FNode, la: tuple, b: FNode, lb: tuple) -> None:
        ta, tb = lanes_subst(a.data["term"], a.shape, la), lanes_subst(b.data["term"], b.shape, lb)
        with relate.ints_related(self, [(ta, tb)], a.line):
            self.ctx.require(ta == tb, pass_name="pairing", what=f"integer converted to float at line {a.line} "
                             "is equal", line=a.line)

    pair_boolint = pair_fromint

    def pair_select(self, a: FNode, la: tuple, b: FNode, lb: tuple) -> None:
        ca, cb = lanes_subst(a.data["cond"], a.shape, la), lanes_subst(b.data["cond"], b.shape, lb)
        with relate.ints_related(self, [(ca, cb)], a.line):
            self.ctx.require(ca == cb, pass_name="pairing", what=f"tl.where guard at line {a.line} is equal",
                             line=a.line)
            for cond, idx in ((ca, 0), (z3.Not(ca), 1)):
                arm = a.args[idx]
                while arm.op == "view":
                    arm = arm.args[0]
                if arm.op == "const" or self.ctx.possible(cond):  # a constant arm pairs without queries
                    with self.ctx.assume(cond):
                        self.pair_args(a, la, b, lb, [idx])

    def pair_reduce(self, a: FNode, la: tuple, b: FNode, lb: tuple) -> None:
        arg = a.args[0]
        axis = a.attrs[1]
        if axis is None:
            ks = [bound_var(f"{a.uid}_{b.uid}_{d}", n, a.line) for d, n in enumerate(arg.shape)]
            lanes = tuple(k for k, _ in ks)
            with self.ctx.assume(*[r for _, r in ks]):
                self.pair(arg, lanes, b.args[0], lanes)
            return
        # Lanes are named after the operand and axis they range over, so a reduction and a dot over
        # the same operand share its element walks (and their memo entries).
        k, rng = bound_var(f"{arg.uid}_{b.args[0].uid}_{axis}", arg.shape[axis], a.line)
        with self.ctx.assume(rng):
            self.pair(arg, arg_lanes(a, la, 0, k), b.args[0], arg_lanes(b, lb, 0, k))

    def pair_dot(self, a: FNode, la: tuple, b: FNode, lb: tuple) -> None:
        if len(a.args) == 3:
            self.pair(a.args[2], la, b.args[2], lb)
        k, rng = bound_var(f"{a.args[0].uid}_{b.args[0].uid}_1", a.args[0].shape[1], a.line)
        with self.ctx.assume(rng):
            pa, pb = arg_lanes(a, la, 0, k), arg_lanes(b, lb, 0, k)
            self.pair(a.args[0], pa, b.args[0], pb)
            va, vb = arg_lanes(a, la, 1, k), arg_lanes(b, lb, 1, k)
            mark = len(self.ctx.obligations)
            try:
                self.pair(a.args[1], va, b.args[1], vb)
                return
            except Failed as exc:
                if exc.obligation.status != "refuted":
                    raise
                first_failure = exc
            # Value analysis: contraction terms whose left operand is exactly +0 in both launches
            # (e.g. causally masked probabilities) do not affect the dot when the right operand is
            # finite (trusted axiom), so those right-operand lanes are not demanded.
            dead = z3.And(self.values.zero_guard(a.args[0], pa, "A"), self.values.zero_guard(b.args[0], pb, "B"))
            dead = z3.simplify(dead)
            if not z3.is_false(dead) and self.ctx.possible(dead):
                with self.ctx.assume(dead):
                    fin_a = self.values.kinds(a.args[1], va, "A") <= FINITE
                    fin_b = self.values.kinds(b.args[1], vb, "B") <= FINITE
                if fin_a and fin_b:
                    del self.ctx.obligations[mark:]
                    with self.ctx.assume(z3.Not(dead)):
                        self.pair(a.args[1], va, b.args[1], vb)
                    self.prob.identities.append(f"line {a.line}: dot terms with a +0 left operand dropped "
                                                "(right operand finite)")
                    return
            first_failure.reason += (f" (the right operand of tl.dot at line {a.line} is demanded there: the value "
                                     "analysis cannot show the left operand is exactly +0 on those elements)")
            if self.values.merged:  # the classes lost precision: the model may not be a real counterexample
                first_failure.obligation.status = "unknown"
                first_failure.reason += "; the value analysis merged guard regions, so this is not a refutation"
            raise first_failure

    def pair_load(self, a: FNode, la: tuple, b: FNode, lb: tuple) -> None:
        relate.pair_load(self, a, la, b, lb)

    def pair_carried(self, a: FNode, la: tuple, b: FNode, lb: tuple) -> None:
        for lp in reversed(self.active):
            if lp.loop_a.loop_id == a.data["loop"] and lp.loop_b.loop_id == b.data["loop"]:
                lp.reach(a.attrs[0], la, lb)
                return
        raise self.fail("pairing", f"value at line {a.line} depends on state carried by the loop at line "
                        f"{a.line} from inside that loop (a store inside a loop must not depend on carried "
                        "state)", a.line, status="unknown")

    def pair_loopres(self, a: FNode, la: tuple, b: FNode, lb: tuple) -> None:
        from proofs.loopproof import prove_loop_result

        prove_loop_result(self, a, la, b, lb)

    def pair_atomic(self, a: FNode, la: tuple, b: FNode, lb: tuple) -> None:
        raise Unsupported("value returned by an atomic", a.line)
