"""Split an element offset into logical indices of a strided tensor.

``offset = Σ idx_k * stride_k`` is recovered from the sum-of-monomials form of the offset:
each monomial goes to the dimension with the largest stride that divides it (symbolic strides
first, by their atoms, then integer strides by divisibility). The split is an algebraic
identity by construction; it denotes the tensor's logical element only when every index is
in bounds, which the safety pass proves separately.
"""

from __future__ import annotations

import z3

from proofs.z3state import on_new_context

__all__ = ["decompose", "monomial", "monomials"]


def monomial(term: z3.ArithRef) -> tuple[int, tuple[z3.ExprRef, ...]]:
    """(integer coefficient, atoms) of one product term."""
    if z3.is_int_value(term):
        return term.as_long(), ()
    if z3.is_mul(term):
        coef, atoms = 1, []
        for child in term.children():
            c, a = monomial(child)
            coef *= c
            atoms.extend(a)
        return coef, tuple(atoms)
    return 1, (term,)


_MONO: dict[int, tuple] = {}


def monomials(term: z3.ArithRef) -> list[tuple[int, tuple[z3.ExprRef, ...]]]:
    """Sum-of-monomials form of ``term`` as (coefficient, atoms) pairs (cached)."""
    hit = _MONO.get(term.get_id())
    if hit is None:
        poly = z3.simplify(term, som=True)
        parts = poly.children() if z3.is_add(poly) else [poly]
        hit = _MONO[term.get_id()] = (term, [monomial(p) for p in parts])
    return hit[1]


_monomials = monomials


def _without(atoms: tuple, remove: tuple) -> tuple | None:
    rest = list(atoms)
    for r in remove:
        for i, a in enumerate(rest):
            if a.eq(r):
                del rest[i]
                break
        else:
            return None
    return tuple(rest)


def _product(coef: int, atoms: tuple) -> z3.ArithRef:
    term = z3.IntVal(coef)
    for a in atoms:
        term = term * a
    return term


_CACHE: dict[tuple, tuple] = {}


@on_new_context
def _clear_term_caches() -> None:
    _MONO.clear()
    _CACHE.clear()


def _decompose(offset: z3.ArithRef, strides: tuple) -> tuple | None:
    stride_monos = []
    for k, s in enumerate(strides):
        mons = _monomials(s if isinstance(s, z3.ExprRef) else z3.IntVal(s))
        if len(mons) != 1 or mons[0][0] <= 0:
            return None
        stride_monos.append((k, *mons[0]))
    # Prefer the most specific stride: more atoms first, then the larger coefficient.
    order = sorted(stride_monos, key=lambda t: (-len(t[2]), -t[1]))
    idx: list[list[z3.ArithRef]] = [[] for _ in strides]
    for coef, atoms in _monomials(offset):
        for k, s_coef, s_atoms in order:
            rest = _without(atoms, s_atoms)
            if rest is not None and coef % s_coef == 0:
                idx[k].append(_product(coef // s_coef, rest))
                break
        else:
            return None
    return tuple(z3.simplify(z3.Sum(parts)) if parts else z3.IntVal(0) for parts in idx)


def decompose(offset: z3.ArithRef, strides: tuple) -> tuple[z3.ArithRef, ...] | None:
    """Logical indices ``idx`` with ``offset == Σ idx_k * strides[k]``, or None."""
    key = (offset.get_id(), *(s.get_id() if isinstance(s, z3.ExprRef) else s for s in strides))
    hit = _CACHE.get(key)
    if hit is None:
        hit = _CACHE[key] = (offset, strides, _decompose(offset, tuple(strides)))  # keeps terms alive
    return hit[2]
