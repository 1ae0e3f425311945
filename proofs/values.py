"""Forward value analysis: which classes of float values (zero, one, ±inf, …) an element holds.

``gkinds`` returns a short list of (guard, classes) pairs for one element of one launch: the
guards are integer conditions on element positions (masks, causal conditions) that split the
element's possible values, e.g. a masked score is ``-inf`` where the causal mask is false and
finite elsewhere. Reductions resolve guards with Z3 (is some lane of the row unmasked for
sure?), loops use a fixpoint over the carried state (:func:`loop_fixpoint`). The walk uses it
to drop dependencies on masked key/value cells; identity steps use it to simplify.
"""

from __future__ import annotations

import z3

from proofs import kinds as K
from proofs.smt import exists
from proofs.tir import FNode, lanes_subst
from proofs.z3state import on_new_context

__all__ = ["Values"]

_T = z3.BoolVal(True)


@on_new_context
def _constants() -> None:
    global _T
    _T = z3.BoolVal(True)
_INTS = frozenset({K.NEG, K.PZERO, K.ONE, K.POS})
_MAX_GUARDS = 4


def _join(gl: list) -> frozenset:
    out: frozenset = frozenset()
    for _, k in gl:
        out |= k
    return out


def _cast(kinds: frozenset, dtype: str, no_overflow: bool) -> frozenset:
    if dtype in ("float32", "float64"):
        return kinds
    out = set(kinds)
    if K.POS in kinds:
        out |= {K.ONE, K.PZERO} | (set() if no_overflow or dtype == "bfloat16" else {K.PINF})
    if K.NEG in kinds:
        out |= {K.NZERO} | (set() if no_overflow or dtype == "bfloat16" else {K.NINF})
    return frozenset(out)


class Values:
    """Value classes of elements of either launch, under the walker's current assumptions."""

    def __init__(self, prob) -> None:
        self.prob = prob
        self.ctx = prob.ctx
        self.no_overflow = prob.contract.no_overflow
        self.env_stack: list[tuple[int, dict]] = []  # (token, carried-state classes) of fixpoints
        self.walker = None
        self._memo: dict = {}
        self._fix: dict = {}
        self._state_dep: dict[int, bool] = {}
        self.uncertain: list | None = None  # records (guard, lane, range) of undecided max/min lanes
        self.forced: frozenset[int] = frozenset()  # guards known to hold on some lane
        # Set once guard regions were merged (_MAX_GUARDS): classes may then be coarser than the
        # kernel's values, so a value fact that cannot be shown is not evidence against the kernel.
        self.merged = False

    # -- public -----------------------------------------------------------------------------
    def kinds(self, node: FNode, lanes: tuple, run: str) -> frozenset:
        return _join(self.gkinds(node, lanes, run))

    def zero_guard(self, node: FNode, lanes: tuple, run: str) -> z3.BoolRef:
        """Condition on positions under which ``node`` is exactly +0."""
        parts = [g for g, k in self.gkinds(node, lanes, run) if k == frozenset({K.PZERO})]
        return z3.Or(*parts) if parts else z3.BoolVal(False)

    def carried_kinds(self, loop_id: int, name: str, run: str) -> frozenset:
        for _, env in reversed(self.env_stack):
            if (run, loop_id) in env:
                return env[run, loop_id].get(name, K.TOP)
        if self.walker is not None:
            for lp in reversed(self.walker.active):
                if lp.loop_of(run).loop_id == loop_id:
                    return lp.entry_kinds(run).get(name, K.TOP)
        return K.TOP

    # -- the analysis -----------------------------------------------------------------------
    def gkinds(self, node: FNode, lanes: tuple, run: str) -> list:
        # Classes of a value that no carried state reaches do not depend on the carried classes
        # in force, so fixpoint rounds share them.
        env = self._env_key(run) if self._stateful(node) else ()
        key = (node.uid, tuple(x.get_id() for x in lanes), run, self.ctx.key, env, tuple(sorted(self.forced)),
               self.uncertain is not None)  # a recording pass recomputes
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = self._compute(node, lanes, run)
        return hit

    def _stateful(self, node: FNode) -> bool:
        hit = self._state_dep.get(node.uid)
        if hit is None:
            hit = node.op in ("carried", "loopres") or any(self._stateful(a) for a in node.args)
            self._state_dep[node.uid] = hit
        return hit

    def _env_key(self, run: str) -> tuple:
        envs = tuple(token for token, _ in self.env_stack)
        active = tuple((id(lp), lp.cls) for lp in self.walker.active) if self.walker else ()
        return envs + active

    def _prune(self, gl: list) -> list:
        out = []
        for g, k in gl:
            g = z3.simplify(g)
            if z3.is_false(g):
                continue
            out.append((g, k))
        if len(out) > _MAX_GUARDS:
            self.merged = True
            return [(_T, _join(out))]
        return out or [(_T, frozenset())]

    def _compute(self, n: FNode, lanes: tuple, run: str) -> list:
        from proofs.walk import arg_lanes, bound_var

        op = n.op
        nov = self.no_overflow
        if op == "const":
            return [(_T, frozenset({K.classify(n.attrs[0])}))]
        if op == "param":
            return [(_T, K.FINITE)]
        if op == "fromint":
            return [(_T, _INTS)]
        if op in ("boolint", "cmp", "atomic"):
            return [(_T, K.TOP)]
        if op == "load":
            spec = self.prob.contract.tensors[n.attrs[0]]
            live = K.FINITE if spec.finite else K.TOP
            if n.data["mask"] is None:
                return [(_T, live)]
            mask = lanes_subst(n.data["mask"], n.shape, lanes)
            other = _join(self.gkinds(n.args[0], lanes, run)) if n.args else K.TOP
            return self._prune([(mask, live), (z3.Not(mask), other)])
        if op == "view":
            return self.gkinds(n.args[0], arg_lanes(n, lanes, 0), run)
        if op == "unary":
            if n.attrs[0] == "not":
                return [(_T, K.TOP)]
            return [(g, K.unary(n.attrs[0], k, no_overflow=nov)) for g, k in self.gkinds(n.args[0], lanes, run)]
        if op == "cast":
            return [(g, _cast(k, n.dtype, nov)) for g, k in self.gkinds(n.args[0], arg_lanes(n, lanes, 0), run)]
        if op in ("binary", "fma"):
            name = n.attrs[0] if op == "binary" else "add"
            if name in ("and", "or"):
                return [(_T, K.TOP)]
            la, lb = arg_lanes(n, lanes, 0), arg_lanes(n, lanes, 1)
            if name == "sub" and n.args[0] is n.args[1] and all(x.eq(y) for x, y in zip(la, lb)):
                k = self.kinds(n.args[0], la, run)
                return [(_T, frozenset({K.PZERO}) if k <= K.FINITE else K.TOP)]
            ga, gb = self.gkinds(n.args[0], la, run), self.gkinds(n.args[1], lb, run)
            out = [(z3.And(g1, g2), K.binary(name, k1, k2, no_overflow=nov)) for g1, k1 in ga for g2, k2 in gb]
            if op == "fma":
                out = [(g, K.TOP) for g, _ in out]
            return self._prune(out)
        if op == "select":
            cond = lanes_subst(n.data["cond"], n.shape, lanes)
            out = []
            for c, idx in ((cond, 0), (z3.Not(cond), 1)):
                with self.ctx.assume(c):  # an infeasible arm only adds classes: sound, less precise
                    out += [(z3.And(c, g), k) for g, k in self.gkinds(n.args[idx], arg_lanes(n, lanes, idx), run)]
            return self._prune(out)
        if op == "fselect":
            cond = n.args[0]
            truth = self.truth(cond, arg_lanes(n, lanes, 0), run)
            out = []
            for value, idx in ((True, 1), (False, 2)):
                if value in truth:
                    gl = self.gkinds(n.args[idx], arg_lanes(n, lanes, idx), run)
                    out += [(g, self._refine(cond, n.args[idx], k, value)) for g, k in gl]
            return self._prune(out)
        if op == "reduce":
            return self._reduce(n, lanes, run, bound_var)
        if op == "dot":
            k, rng = bound_var(f"v{n.uid}", n.args[0].shape[1])
            with self.ctx.assume(rng):
                ka = self.kinds(n.args[0], arg_lanes(n, lanes, 0, k), run)
                kb = self.kinds(n.args[1], arg_lanes(n, lanes, 1, k), run)
            total = K.closure("add", K.binary("mul", ka, kb, no_overflow=nov), no_overflow=nov)
            if len(n.args) == 3:
                total = K.binary("add", self.kinds(n.args[2], lanes, run), total, no_overflow=nov)
            return [(_T, total)]
        if op == "carried":
            return [(_T, self.carried_kinds(n.data["loop"], n.attrs[0], run))]
        if op == "loopres":
            from proofs.loopstate import exit_kinds

            return [(_T, exit_kinds(self, run, n, lanes))]
        return [(_T, K.TOP)]

    def _reduce(self, n: FNode, lanes: tuple, run: str, bound_var) -> list:
        from proofs.walk import arg_lanes

        op, axis = n.attrs
        arg = n.args[0]
        if axis is None:
            return [(_T, K.closure({"sum": "add"}.get(op, op), self.kinds(arg, (z3.IntVal(0),) * len(arg.shape), run)))]
        k, rng = bound_var(f"v{n.uid}", arg.shape[axis])
        with self.ctx.assume(rng):
            gl = self.gkinds(arg, arg_lanes(n, lanes, 0, k), run)
            present = gl if len(gl) == 1 else [(g, ks) for g, ks in gl if z3.is_true(g) or self.ctx.possible(g)]
        union = _join(present)
        res = K.closure({"sum": "add"}.get(op, op), union, no_overflow=self.no_overflow)
        drop = {"max": K.NINF, "min": K.PINF}.get(op)
        if drop is not None:
            for g, ks in present:
                if drop in ks or K.NAN in ks:
                    continue
                if z3.is_true(g) or g.get_id() in self.forced or self.ctx.valid(exists([k], z3.And(rng, g))):
                    res -= {drop}
                    break
                if self.uncertain is not None:
                    self.uncertain.append((g, k, rng))
        return [(_T, res)]

    @staticmethod
    def _refine(cond: FNode, arm: FNode, classes: frozenset, value: bool) -> frozenset:
        """Classes of ``arm`` where ``cond`` is ``value``, when cond compares arm to a constant
        (``where(m > -inf, m, 0)`` takes its first arm only for m > -inf)."""
        if cond.op != "cmp":
            return classes
        a, b = cond.args
        for x, c, op in ((a, b, cond.attrs[0]), (b, a, {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}.get(
                cond.attrs[0], cond.attrs[0]))):
            while x.op == "view":
                x = x.args[0]
            while c.op == "view":
                c = c.args[0]
            if x is arm and c.op == "const":
                const = frozenset({K.classify(c.attrs[0])})
                return frozenset(k for k in classes if value in K.compare(op, frozenset({k}), const))
        return classes

    def truth(self, node: FNode, lanes: tuple, run: str) -> frozenset:
        """Possible truth values of a float comparison element."""
        from proofs.walk import arg_lanes

        if node.op == "cmp":
            ka = self.kinds(node.args[0], arg_lanes(node, lanes, 0), run)
            kb = self.kinds(node.args[1], arg_lanes(node, lanes, 1), run)
            return K.compare(node.attrs[0], ka, kb)
        if node.op == "unary" and node.attrs[0] == "not":
            return frozenset(not t for t in self.truth(node.args[0], lanes, run))
        return frozenset({True, False})
