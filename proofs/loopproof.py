"""Pairing the iterations of a loop in two launches (ordered reductions) and extra iterations.

Iterations are paired by index when both launches start at the same value or run the same
number of iterations, and otherwise by the value of the loop variable (same step, aligned
starts). Paired iterations form an induction: the demanded carried elements are equal at entry
(the initial values pair) and stay equal (the bodies pair, with the carried entry values as
hypotheses). Iterations of one launch without a partner — a longer tail, or a head before the
other launch's start — are accepted only if each is an *exact identity transition* on the
demanded elements (:mod:`proofs.identity`): a prefix from the initial state, a suffix from
any reachable state. Anything else is refuted or unknown, never assumed.
"""

from __future__ import annotations

from contextlib import contextmanager

import z3

from proofs import kinds as K
from proofs import relate
from proofs.identity import SConst, Simplifier, Sym, live_load
from proofs.loopstate import demanded_lanes, next_token, forced_fixpoint, loop_fixpoint, uncertain_guards
from proofs.smt import Ctx, Failed, exists
from proofs.tir import FNode, Loop

__all__ = ["LoopProof", "prove_loop_result"]


_SPLIT = (("first", "first"), ("first", "later"), ("later", "first"), ("later", "later"))


class LoopProof:
    """Pairing of loop ``loop_a`` of launch A with ``loop_b`` of launch B under one context."""

    def __init__(self, walker, loop_a: Loop, loop_b: Loop) -> None:
        self.w, self.loop_a, self.loop_b = walker, loop_a, loop_b
        self.ctx = walker.ctx
        self.reaches: dict[tuple, tuple] = {}
        self.todo: list[tuple] = []
        self.identity_done: set = set()
        self.cls: tuple | None = None
        self.entry: dict = {}
        self.mode = ""
        self.entry_for: set = set()
        self.base_stack: list = []

    def loop_of(self, run: str) -> Loop:
        return self.loop_a if run == "A" else self.loop_b

    def entry_kinds(self, run: str) -> dict:
        """Carried-state classes at entry of the current iteration class (computed on demand)."""
        if not self.cls:
            return {}
        if not {n for n, _, _ in self.reaches.values()} <= self.entry_for:
            self._prepare_kinds()
        cls = self.cls[0 if run == "A" else 1]
        if cls == "any":
            first, later = self.entry.get((run, "first"), {}), self.entry.get((run, "later"), {})
            return {n: first.get(n, frozenset()) | later.get(n, frozenset()) for n in set(first) | set(later)}
        return self.entry.get((run, cls), {})

    def reach(self, name: str, la: tuple, lb: tuple) -> None:
        key = (name, tuple(x.get_id() for x in la), tuple(x.get_id() for x in lb))
        if key not in self.reaches:
            self.reaches[key] = (name, la, lb)
            self.todo.append(key)

    # -- setup: bounds, mode, extras --------------------------------------------------------
    @contextmanager
    def entered(self):
        a, b = self.loop_a, self.loop_b
        line = a.line
        with relate.ints_related(self.w, [(a.lo, b.lo), (a.hi, b.hi), (a.step, b.step)], line):
            if not self.mode:
                self._setup(line)
            self.base_stack = list(self.ctx.stack)
            yield

    def _setup(self, line: int) -> None:
        a, b, ctx = self.loop_a, self.loop_b, self.ctx
        if (a.step_const is None) != (b.step_const is None) or a.step_const != b.step_const:
            raise self.w.fail("pairing", f"loop at line {line}: step differs between launches", line)
        if a.step_const is None:
            ctx.require(a.step == b.step, pass_name="pairing", what=f"loop at line {line}: steps are equal", line=line)
        step = a.step
        if ctx.valid(a.lo == b.lo) or ctx.valid(a.trip == b.trip):
            self.mode = "index"
            self.pairing = a.it == b.it
            self.extras = {"A": ("suffix", z3.And(a.in_range(), a.it >= b.trip)),
                           "B": ("suffix", z3.And(b.in_range(), b.it >= a.trip))}
        else:
            self.mode = "value"
            ctx.require((a.lo - b.lo) % step == 0, pass_name="pairing",
                        what=f"loop at line {line}: start values are aligned to the step", line=line)
            self.pairing = a.lo + a.it * step == b.lo + b.it * step
            xa, xb = a.lo + a.it * step, b.lo + b.it * step
            self.extras = {"A": ("prefix", z3.And(a.in_range(), xa < b.lo)), "B": ("prefix", z3.And(b.in_range(), xb < a.lo)),
                           "A+": ("suffix", z3.And(a.in_range(), xa >= b.hi)), "B+": ("suffix", z3.And(b.in_range(), xb >= a.hi))}
        self.ranges = z3.And(a.in_range(), b.in_range(), self.pairing)
        self.w.prob.identities.append(f"loop at line {line}: iterations paired by {self.mode}")

    # -- induction over paired iterations ---------------------------------------------------
    @contextmanager
    def loop_level(self):
        """Run value analyses under the loop-level assumptions, in a solver of their own (the
        request may come from deep inside the walk of an iteration)."""
        values, outer = self.w.values, self.w.values.ctx
        sub = Ctx(self.w.prob.timeout_ms, self.w.prob.app_premises)
        values.ctx = sub
        active, self.w.active = self.w.active, []
        try:
            with sub.assume(*self.base_stack):
                yield
        finally:
            values.ctx = outer
            self.w.active = active

    def demanded(self, run: str) -> dict:
        roots: dict = {}
        for name, la, lb in self.reaches.values():
            roots.setdefault(name, la if run == "A" else lb)
        return demanded_lanes(self.loop_of(run), roots, self.w.prob.launch(run).ir)

    @property
    def symmetric(self) -> bool:
        """Equal constexprs: launch B's single-launch facts are launch A's renamed."""
        return self.w.prob.A.ir.constexprs == self.w.prob.B.ir.constexprs

    def _prepare_kinds(self) -> None:
        with self.loop_level():
            for run in ("A",) if self.symmetric else ("A", "B"):
                demanded = self.demanded(run)
                init, later, _ = loop_fixpoint(self.w.values, run, self.loop_of(run), demanded)
                self.entry[run, "first"], self.entry[run, "later"] = init, later
                self.entry_for = set(demanded) if run == "A" else self.entry_for & set(demanded)
        if self.symmetric:  # value classes carry no launch-specific terms
            self.entry["B", "first"], self.entry["B", "later"] = self.entry["A", "first"], self.entry["A", "later"]

    def _after_witness(self, run: str, cond: z3.BoolRef) -> dict | None:
        """Entry classes of the extra iterations ``cond`` when some earlier iteration surely
        had a lane on which an undecided max/min guard holds (see loopstate.forced_fixpoint)."""
        loop, values = self.loop_of(run), self.w.values
        with self.loop_level():
            guards = uncertain_guards(values, run, loop, self.demanded(run))
        for guard, lane, rng in guards:
            v, k = z3.Int(f"witness_it@{run}"), z3.Int("witness_lane")
            at = lambda t: z3.substitute(t, (loop.it, v), (lane, k))
            earlier = exists([v, k], z3.And(v >= 0, v < loop.it, loop.in_range(v), at(rng), at(guard)))
            with self.ctx.assume(cond):
                if not self.ctx.valid(earlier):
                    continue
            with self.loop_level():
                start = {n: self.entry[run, "first"].get(n, K.TOP) | self.entry[run, "later"].get(n, K.TOP)
                         for n in self.demanded(run)}
                return forced_fixpoint(values, run, loop, self.demanded(run), start, guard)
        return None

    def run(self) -> None:
        a, b, w = self.loop_a, self.loop_b, self.w
        while self.todo:
            name, la, lb = self.reaches[self.todo.pop()]
            w.pair(a.init[name], la, b.init[name], lb)
            # One walk with the carried classes of all iterations joined is usually enough; the
            # first iteration is split from the others only when that walk fails.
            mark = len(self.ctx.obligations)
            try:
                self._walk_next(name, la, lb, [("any", "any")])
            except Failed:
                del self.ctx.obligations[mark:]
                self._walk_next(name, la, lb, _SPLIT)
        for label, (kind, cond) in self.extras.items():
            run = label[0]
            if run == "B" and self.symmetric:
                continue  # launch B's extra iterations are launch A's renamed
            if self.ctx.possible(cond):
                if not {n for n, _, _ in self.reaches.values()} <= self.entry_for:
                    self._prepare_kinds()
                self._identity(run, kind, cond)

    def _walk_next(self, name: str, la: tuple, lb: tuple, classes) -> None:
        a, b, w = self.loop_a, self.loop_b, self.w
        for cls in classes:
            parts = [self.ranges]
            for it, c in ((a.it, cls[0]), (b.it, cls[1])):
                parts += [it == 0] if c == "first" else [it >= 1] if c == "later" else []
            cond = z3.And(*parts)
            if not self.ctx.possible(cond):
                continue
            self.cls = cls
            w.active.append(self)
            try:
                with self.ctx.assume(cond):
                    w.pair(a.next[name], la, b.next[name], lb)
            finally:
                w.active.pop()
                self.cls = None

    # -- extra iterations -------------------------------------------------------------------
    def _identity(self, run: str, kind: str, cond: z3.BoolRef) -> None:
        loop = self.loop_of(run)
        todo = [(n, la if run == "A" else lb) for n, la, lb in self.reaches.values()
                if (run, kind, n) not in self.identity_done]
        if not todo:
            return
        states = [self.entry[run, "first"]] if kind == "prefix" else [self.entry[run, "later"]]
        if kind == "suffix" and self.ctx.possible(z3.And(cond, loop.it == 0)):
            states.append(self.entry[run, "first"])
        for state in states:
            try:
                self._check_state(run, kind, cond, loop, todo, state)
            except Failed as exc:
                refined = self._after_witness(run, cond) if kind == "suffix" and \
                    exc.obligation.status == "unknown" else None
                if refined is None:
                    raise
                del self.ctx.obligations[-1]
                self._check_state(run, kind, cond, loop, todo, refined)
        for name, _ in todo:
            self.identity_done.add((run, kind, name))
        self.w.prob.identities.append(f"loop at line {loop.line}: extra {kind} iterations of launch {run} proved "
                                      f"exact identities on {', '.join(sorted(n for n, _ in todo))}")

    def _check_state(self, run, kind, cond, loop, todo, state) -> None:
        simp = Simplifier(self.w.values, run, loop.loop_id, state)
        self.w.values.env_stack.append((next_token(), {(run, loop.loop_id): state}))
        try:
            self._check_simplified(simp, kind, cond, loop, todo, state, run)
        finally:
            self.w.values.env_stack.pop()

    def _check_simplified(self, simp, kind, cond, loop, todo, state, run) -> None:
        with self.ctx.assume(cond):
            for name, lanes in todo:
                got = simp.simp(loop.next[name], lanes)
                classes = state.get(name, K.TOP)
                exact = K.exact_value(classes)
                if isinstance(got, Sym) and got.same(Sym(name, lanes, classes)):
                    continue
                if isinstance(got, SConst) and exact is not None and SConst(exact).classes == got.classes:
                    continue  # an exactly known state mapped to the same exact value
                definite = isinstance(got, SConst) and not got.classes <= classes
                what = (f"loop at line {loop.line}: an extra {kind} iteration of launch {run} (one the other "
                        f"launch does not run) is not an exact identity on {name!r}")
                live = live_load(simp) if got is None else None
                if definite:
                    what += f" (it becomes {got.value!r} from {K.show(classes)})"
                elif live is not None:
                    definite = True
                    what += f" (it folds live elements of {live[0].attrs[0]} loaded at line {live[0].line} into it)"
                raise self.w.fail("identity", what, loop.line, status="refuted" if definite else "unknown")


def prove_loop_result(walker, a: FNode, la: tuple, b: FNode, lb: tuple) -> None:
    """Pair the loop results ``a`` (launch A) and ``b`` (launch B) at the given elements."""
    loop_a = walker.prob.A.ir.loops[a.data["loop"]]
    loop_b = walker.prob.B.ir.loops[b.data["loop"]]
    key = (loop_a.loop_id, loop_b.loop_id, walker.ctx.key)
    lp = walker.loop_proofs.get(key)
    if lp is None:
        lp = walker.loop_proofs[key] = LoopProof(walker, loop_a, loop_b)
    with lp.entered():
        lp.reach(a.attrs[0], la, lb)
        lp.run()
