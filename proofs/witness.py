"""Witnesses for "the selected element is written": writer variables as functions of it.

Proving ``∀ element ∃ writer`` with a quantifier is slow in context, so the writer is
constructed instead: an address index that is the same function of a writer variable as the
selected index is of some term gives that term (``slot_mapping[pid] = slot_mapping[tok]``
gives ``pid = tok``); an index ``c*p + l + d`` with a lane ``l`` ranging over ``[0, c)`` gives
``p = (s - d) div c`` and ``l = (s - d) mod c`` (also when ``l`` ranges wider, over masked
lanes); a lone ``l + d`` gives ``l = s - d``. A variable ``l`` that occurs only as ``l div c`` and
``l mod c`` for one constant ``c > 0`` (a tile row split into (token, head) by ``r // G`` and
``r % G``) is solved as two unknowns, its quotient ``q`` and its remainder ``m`` (a lane over
``[0, c)``), and rebuilt as ``l = c*q + m`` (:mod:`proofs.divmod`). Variables left over take 0. The construction is only a guess: the driver proves (without
quantifiers) that the guessed writer satisfies the writer constraint.
"""

from __future__ import annotations

import itertools

import z3

from proofs.divmod import divisors, quotient_remainder
from proofs.layout import monomial

__all__ = ["guess", "guesses"]


def _match(pattern: z3.ExprRef, term: z3.ExprRef, names: set, out: dict) -> bool:
    if z3.is_const(pattern) and str(pattern) in names:
        if str(pattern) in out:
            return out[str(pattern)].eq(term)
        out[str(pattern)] = term
        return True
    if z3.is_app(pattern) and z3.is_app(term) and pattern.decl().eq(term.decl()) \
            and pattern.num_args() == term.num_args() and pattern.num_args() > 0:
        trial = dict(out)
        if all(_match(p, t, names, trial) for p, t in zip(pattern.children(), term.children())):
            out.update(trial)
            return True
        return False
    return pattern.eq(term)


def _invert(index: z3.ArithRef, target: z3.ArithRef, names: set, sizes: dict, out: dict) -> None:
    poly = z3.simplify(index, som=True)
    parts = [monomial(p) for p in (poly.children() if z3.is_add(poly) else [poly])]
    free, rest = [], []
    for coef, atoms in parts:
        if len(atoms) == 1 and z3.is_const(atoms[0]) and str(atoms[0]) in names and str(atoms[0]) not in out:
            free.append((coef, atoms[0]))
        else:
            rest.append((coef, atoms))
    offset = z3.IntVal(0)
    for coef, atoms in rest:
        term = z3.IntVal(coef)
        for a in atoms:
            term = term * a
        offset = offset + term
    s = target - offset
    lanes = [(c, v) for c, v in free if c == 1 and str(v) in sizes]
    outer = [(c, v) for c, v in free if (c, v) not in lanes]
    if len(lanes) == 1 and len(outer) == 1 and 1 < outer[0][0] <= sizes[str(lanes[0][1])]:
        c = outer[0][0]
        out[str(outer[0][1])] = s / c
        out[str(lanes[0][1])] = s % c
    elif len(free) == 1 and free[0][0] == 1:
        out[str(free[0][1])] = s
    elif len(free) == 1 and free[0][0] > 1:
        out[str(free[0][1])] = s / free[0][0]


def guesses(equations: list[tuple[z3.ArithRef, z3.ArithRef]], variables: list[z3.ArithRef],
            lane_sizes: dict[str, int], candidates: list[z3.ArithRef]) -> list[list[tuple]]:
    """Witness guesses; a variable used only inside tensor contents (``query_start[pid]``) is
    tried with each of ``candidates`` (the contract's group indices of this launch)."""
    first = guess(equations, variables, lane_sizes)
    out = [first]
    inside = [v for v, t in first if z3.is_int_value(t) and t.as_long() == 0
              and any(_inside_app(str(v), i) for i, _ in equations)]
    for combo in itertools.product(candidates, repeat=len(inside)) if inside else ():
        fixed = dict(zip((str(v) for v in inside), combo))
        out.append(guess(equations, variables, lane_sizes, fixed))
    return out


def _inside_app(name: str, term: z3.ExprRef) -> bool:
    if z3.is_app(term) and term.num_args() and term.decl().kind() == z3.Z3_OP_UNINTERPRETED:
        return any(name in str(c) for c in term.children())
    return any(_inside_app(name, c) for c in term.children())


def _quotient_remainder(equations: list, names: set, sizes: dict) -> tuple[list, dict, dict, set]:
    """Equations with each splittable ``v div c`` / ``v mod c`` replaced by fresh unknowns.

    Returns (equations, lane sizes of the new unknowns, {v: (c, quotient, remainder)}, their names).
    """
    found, other = divisors([index for index, _ in equations], names)
    splits, pairs, extra = {}, [], {}
    for name, cs in found.items():
        if name in other or len(cs) != 1:
            continue
        (c,) = cs
        q, m, subst = quotient_remainder(name, c)
        splits[name] = (c, q, m)
        pairs += subst
        extra[str(m)] = c
        if name in sizes:
            extra[str(q)] = -(-sizes[name] // c)
    if not splits:
        return equations, {}, {}, set()
    eqs = [(z3.substitute(i, *pairs), t) for i, t in equations]
    return eqs, extra, splits, {str(u) for _, q, m in splits.values() for u in (q, m)}


def guess(equations: list[tuple[z3.ArithRef, z3.ArithRef]], variables: list[z3.ArithRef],
          lane_sizes: dict[str, int], fixed: dict | None = None) -> list[tuple[z3.ArithRef, z3.ArithRef]]:
    """Substitution pairs (variable, witness term) for ``index == selected`` equations."""
    names = {str(v) for v in variables}
    equations, pseudo_sizes, splits, pseudo = _quotient_remainder(equations, names, lane_sizes)
    names |= pseudo
    lane_sizes = {**lane_sizes, **pseudo_sizes}
    out: dict[str, z3.ArithRef] = dict(fixed or {})
    pending = []
    for index, target in equations:
        trial: dict = dict(out)
        if _match(index, target, names, trial) and not index.eq(target):
            out = trial
        else:
            pending.append((index, target))
    for _ in range(2):  # a second round uses variables fixed by the first
        for index, target in pending:
            known = [(z3.Int(n), t) for n, t in out.items()]
            _invert(z3.substitute(index, *known) if known else index, target, names, lane_sizes, out)
    for name, (c, q, m) in splits.items():
        if name not in out:
            out[name] = c * out.get(str(q), z3.IntVal(0)) + out.get(str(m), z3.IntVal(0))
    return [(v, out.get(str(v), z3.IntVal(0))) for v in variables]
