"""Discharging obligations with Z3: one incremental solver per verification, with timeouts.

Integers are mathematical ``Int`` terms; 32-bit wrap-around is excluded by explicit range
obligations (see :mod:`proofs.safety`). Every check is recorded as an :class:`Obligation`
with its pass, source line, outcome and time; a refuted check keeps the Z3 model as the
counterexample.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

import z3

from proofs.divmod import split_bound
from proofs.z3state import on_new_context

__all__ = ["Obligation", "Ctx", "Failed", "I32", "uf_apps", "children", "model_values", "exists"]


RLIMIT = 3_000_000  # Z3 resource units per query (the plan's largest queries use under 200 000)


def I32(e: z3.ArithRef) -> z3.BoolRef:
    return z3.And(e >= -(2**31), e < 2**31)


@dataclass(slots=True)
class Obligation:
    """One proof obligation and its outcome."""

    pass_name: str  # safety | pdl | writers | demand | pairing | values | identity
    what: str
    line: int
    status: str  # proved | refuted | unknown
    ms: float
    counterexample: dict = field(default_factory=dict)


class Failed(Exception):
    """An obligation did not hold: ``status`` is refuted (with a model) or unknown."""

    def __init__(self, obligation: Obligation, reason: str = "") -> None:
        self.obligation = obligation
        self.reason = reason or obligation.what
        super().__init__(self.reason)


_APPS: dict[int, tuple] = {}
_KIDS: dict[int, tuple] = {}
_QE: dict[tuple, z3.BoolRef] = {}


@on_new_context
def _clear_term_caches() -> None:
    _APPS.clear()
    _KIDS.clear()
    _QE.clear()


def children(term: z3.ExprRef) -> tuple:
    """``term.children()``, memoised per term (z3py builds new wrappers on every call)."""
    hit = _KIDS.get(term.get_id())
    if hit is None:
        hit = _KIDS[term.get_id()] = (term, tuple(term.children()))
    return hit[1]


def _is_tensor_app(t: z3.ExprRef) -> bool:
    if not z3.is_app(t) or t.num_args() == 0 or t.decl().kind() != z3.Z3_OP_UNINTERPRETED:
        return False
    name = t.decl().name()
    return "@" in name and not name.startswith(("undef", "opaque"))


def uf_apps(term: z3.ExprRef) -> tuple[z3.ExprRef, ...]:
    """Applications of integer-tensor functions (names like ``T@A``) inside ``term``.

    Memoised per subterm, so terms sharing large subterms cost one visit each.
    """
    hit = _APPS.get(term.get_id())
    if hit is not None:
        return hit[1]
    out: dict[int, z3.ExprRef] = {}
    if not z3.is_quantifier(term):
        if _is_tensor_app(term):
            out[term.get_id()] = term
        for child in children(term):
            for a in uf_apps(child):
                out.setdefault(a.get_id(), a)
    apps = tuple(out.values())
    _APPS[term.get_id()] = (term, apps)  # keeps the term alive so its id stays unique
    return apps



def exists(variables: list, body: z3.BoolRef) -> z3.BoolRef:
    """``∃ variables. body`` without a quantifier when Z3's quantifier elimination manages it.

    Tensor contents not mentioning the variables are abstracted as constants for the
    elimination and put back afterwards; a variable divided by one positive constant is
    eliminated as its quotient and remainder (:mod:`proofs.divmod`); if a quantifier remains, the quantified formula is
    returned (still correct, only slower to check).
    """
    key = (tuple(v.get_id() for v in variables), body.get_id())
    if key in _QE:
        return _QE[key]
    names = [str(v) for v in variables]
    apps = [a for a in uf_apps(body) if not any(n in a.sexpr() for n in names)]  # only contents free of them
    consts = [z3.Int(f"_qe{i}") for i in range(len(apps))]
    flat = z3.substitute(body, *zip(apps, consts)) if apps else body
    split_vars, flat = split_bound(list(variables), flat)  # v div c, v mod c: linear in quotient and remainder
    goal = z3.Goal()
    goal.add(z3.Exists(split_vars, flat))
    try:
        reduced = z3.Tactic("qe")(goal).as_expr()
    except z3.Z3Exception:
        reduced = None
    if reduced is None or z3.is_quantifier(reduced) or "exists" in reduced.sexpr():
        out = z3.Exists(variables, body)
    else:
        out = z3.substitute(reduced, *zip(consts, apps)) if apps else reduced
    _QE[key] = out
    _QE[key + (0,)] = body  # keeps the key's terms alive
    return out


def model_values(model: z3.ModelRef) -> dict[str, int]:
    """Integer constants of a model, by name (uninterpreted tensor contents left out)."""
    out = {}
    for d in model.decls():
        if d.arity() == 0:
            v = model[d]
            if z3.is_int_value(v):
                out[d.name()] = v.as_long()
    return dict(sorted(out.items()))


class Ctx:
    """A stack of assumptions over an incremental solver; ``prove`` checks goals under it.

    Integer-tensor contents get their premises once, when they first occur at some level:
    ``app_premises(new, known)`` returns premises for the new applications (pairwise ones
    against all known applications too).
    """

    def __init__(self, timeout_ms: int = 60000, app_premises: Callable[[list, list], list] | None = None,
                 rlimit: int = RLIMIT) -> None:
        self.solver = z3.Solver()
        # The resource limit makes "unknown" reproducible under any machine load; the wall-clock
        # timeout is only a backstop.
        self.solver.set("rlimit", rlimit)
        self.solver.set("timeout", timeout_ms)
        self.stack: list[z3.BoolRef] = []
        self.obligations: list[Obligation] = []
        self.app_premises = app_premises or (lambda new, known: [])
        self._levels: list[dict[int, z3.ExprRef]] = [{}]
        self._keys: list[tuple] = [()]
        self._cache: dict[tuple, tuple] = {}
        self._alive: list = []

    def _new_apps(self, terms: list) -> dict[int, z3.ExprRef]:
        new: dict[int, z3.ExprRef] = {}
        for t in terms:
            for a in uf_apps(t):
                if a.get_id() not in new and not any(a.get_id() in level for level in self._levels):
                    new[a.get_id()] = a
        return new

    def _premises(self, new: dict) -> list:
        if not new:
            return []
        known = [a for level in self._levels for a in level.values()]
        return self.app_premises(list(new.values()), known)

    @contextmanager
    def assume(self, *conds: z3.BoolRef) -> Iterator[None]:
        conds = tuple(c for c in conds if c is not None and not z3.is_true(c))
        self.solver.push()
        new = self._new_apps(list(conds))
        self.solver.add(*conds, *self._premises(new))
        self.stack.extend(conds)
        self._levels.append(new)
        self._keys.append(self._keys[-1] + tuple(c.get_id() for c in conds))
        self._alive.extend(conds)  # ids in cache keys must not be reused by new terms
        try:
            yield
        finally:
            self.solver.pop()
            self._levels.pop()
            self._keys.pop()
            del self.stack[len(self.stack) - len(conds):]

    @property
    def key(self) -> tuple:
        return self._keys[-1]

    def _check_with(self, cond: z3.BoolRef, want_model: bool = False) -> tuple[z3.CheckSatResult, dict]:
        # The assertion set is determined by the stack, so answers are cached by (stack, query).
        key = (self._keys[-1], cond.get_id())
        hit = self._cache.get(key)
        if hit is not None and (hit[0] != z3.sat or not want_model or hit[1]):
            return hit[0], hit[1]
        self.solver.push()
        try:
            new = self._new_apps([cond])
            self.solver.add(cond, *self._premises(new))
            r = self.solver.check()
            out = (r, model_values(self.solver.model()) if want_model and r == z3.sat else {})
            self._cache[key] = (out[0], out[1], cond)  # keeps cond alive so its id stays unique
            return out
        finally:
            self.solver.pop()

    def check(self, cond: z3.BoolRef) -> z3.CheckSatResult:
        """Satisfiability of ``cond`` under the current assumptions."""
        return self._check_with(cond)[0]

    def model(self) -> dict[str, int]:
        """Values of a model of the current assumptions (empty if none is found)."""
        return self._check_with(z3.BoolVal(True), want_model=True)[1]

    def prove(self, goal: z3.BoolRef, *, pass_name: str, what: str, line: int = 0) -> Obligation:
        """Check that ``goal`` holds under the assumptions; record and return the obligation."""
        start = time.perf_counter()
        r, model = self._check_with(z3.Not(goal), want_model=True)
        status = "proved" if r == z3.unsat else "refuted" if r == z3.sat else "unknown"
        ob = Obligation(pass_name, what, line, status, (time.perf_counter() - start) * 1000, model)
        self.obligations.append(ob)
        return ob

    def require(self, goal: z3.BoolRef, *, pass_name: str, what: str, line: int = 0) -> Obligation:
        """Like :meth:`prove`, but raise :class:`Failed` unless the goal is proved."""
        ob = self.prove(goal, pass_name=pass_name, what=what, line=line)
        if ob.status != "proved":
            raise Failed(ob)
        return ob

    def require_all(self, goals: list[tuple[z3.BoolRef, str, str]], line: int = 0) -> None:
        """Require every (goal, pass, what) with one query; on failure, find and report the failing one."""
        if len(goals) > 1:
            ob = self.prove(z3.And(*[g for g, _, _ in goals]), pass_name=goals[0][1],
                            what="; ".join(what for _, _, what in goals), line=line)
            if ob.status == "proved":
                return
            self.obligations.pop()
        for goal, pass_name, what in goals:  # a conjunction may exceed the resource limit where its parts do not
            self.require(goal, pass_name=pass_name, what=what, line=line)

    def valid(self, goal: z3.BoolRef) -> bool:
        """Whether ``goal`` provably holds (an unrecorded helper query)."""
        return self.check(z3.Not(goal)) == z3.unsat

    def possible(self, cond: z3.BoolRef) -> bool:
        """Whether ``cond`` may hold (sat or unknown)."""
        return self.check(cond) != z3.unsat
