"""Division and modulo of a variable by a positive constant, rewritten as quotient and remainder.

For a constant ``c > 0``, ``v ↦ (v div c, v mod c)`` is a bijection from the integers onto
``Z × [0, c)`` with inverse ``(q, m) ↦ c*q + m`` (Z3's ``div``/``mod`` are Euclidean, which for a
positive divisor is floor division). So a formula over ``v`` in which ``v`` occurs as ``v div c``,
``v mod c`` or bare can be stated exactly over ``q`` and ``m`` instead, without division: the
writer witness solves for ``q`` and ``m`` separately, and quantifier elimination over ``q`` and
``m`` stays linear.
"""

from __future__ import annotations

import z3

__all__ = ["divisors", "quotient_remainder", "split_bound"]


def divisors(terms: list, names: set) -> tuple[dict[str, set[int]], set[str]]:
    """({variable: constants it is divided or reduced by}, variables that also occur bare)."""
    found: dict[str, set[int]] = {}
    bare: set[str] = set()
    seen: set[int] = set()
    todo = list(terms)
    while todo:
        term = todo.pop()
        if term.get_id() in seen:
            continue
        seen.add(term.get_id())
        if (z3.is_idiv(term) or z3.is_mod(term)) and z3.is_const(term.arg(0)) and str(term.arg(0)) in names \
                and z3.is_int_value(term.arg(1)) and term.arg(1).as_long() > 0:
            found.setdefault(str(term.arg(0)), set()).add(term.arg(1).as_long())
            continue
        if z3.is_const(term) and str(term) in names:
            bare.add(str(term))
        todo.extend(term.children())
    return found, bare


def quotient_remainder(name: str, c: int) -> tuple[z3.ArithRef, z3.ArithRef, list]:
    """(quotient, remainder, substitution pairs ``v div c -> q``, ``v mod c -> m``) for ``name``."""
    v = z3.Int(name)
    q, m = z3.Int(f"{name}/{c}"), z3.Int(f"{name}%{c}")
    return q, m, [(v / c, q), (v % c, m)]


def split_bound(variables: list, body: z3.BoolRef) -> tuple[list, z3.BoolRef]:
    """``∃ variables. body`` restated over quotients and remainders where a variable is divided
    by exactly one positive constant: (new variables, new body), an equivalent formula."""
    names = {str(v) for v in variables}
    found, _ = divisors([body], names)
    out_vars = [v for v in variables if len(found.get(str(v), ())) != 1]
    for v in variables:
        cs = found.get(str(v), set())
        if len(cs) != 1:
            continue
        (c,) = cs
        q, m, pairs = quotient_remainder(str(v), c)
        body = z3.substitute(z3.substitute(body, *pairs), (v, c * q + m))
        body = z3.And(m >= 0, m < c, body)
        out_vars += [q, m]
    return out_vars, body
