"""Loop-carried value classes of one launch: a fixpoint over the first and later iterations.

The carried variables a loop result needs are found by following element positions through
the loop body (:func:`demanded_lanes`). Their classes at the first iteration are those of the
initial values; the classes at later iterations are the least fixpoint of the body's transfer
under ``it >= 1``. Keeping the first iteration apart is what shows, e.g., that the running
maximum of causal attention is finite from the second key tile on (the first tile always holds
key 0, which every query sees).
"""

from __future__ import annotations

import itertools

import z3

from proofs import kinds as K
from proofs.tir import FNode, Loop
from proofs.z3state import on_new_context

__all__ = ["demanded_lanes", "loop_fixpoint", "exit_kinds", "uncertain_guards", "forced_fixpoint", "next_token"]

_tokens = itertools.count(1)


@on_new_context
def _fresh_tokens() -> None:
    global _tokens
    _tokens = itertools.count(1)


def next_token() -> int:
    """A new environment token (unique within one verification)."""
    return next(_tokens)
_MAX_ROUNDS = 24


def _ids(lanes: tuple) -> tuple:
    return tuple(x.get_id() for x in lanes)


def demanded_lanes(loop: Loop, roots: dict[str, tuple], ir) -> dict[str, tuple]:
    """Carried variables (and positions) that the given carried results depend on."""
    from proofs.walk import arg_lanes, bound_var

    out = dict(roots)
    todo = list(roots)
    while todo:
        name = todo.pop()
        stack, seen = [(loop.next[name], out[name])], set()
        while stack:
            node, lanes = stack.pop()
            key = (node.uid, _ids(lanes))
            if key in seen:
                continue
            seen.add(key)
            if node.op == "carried" and node.data["loop"] == loop.loop_id:
                if node.attrs[0] not in out:
                    out[node.attrs[0]] = lanes
                    todo.append(node.attrs[0])
                continue
            if node.op == "loopres":
                inner = ir.loops[node.data["loop"]]
                stack.append((inner.init[node.attrs[0]], lanes))
                stack += [(v, lanes) for v in inner.next.values() if v.shape == node.shape]
                continue
            if node.op == "reduce" and node.attrs[1] is None:
                arg = node.args[0]
                stack.append((arg, tuple(bound_var(f"s{node.uid}_{d}", n)[0] for d, n in enumerate(arg.shape))))
                continue
            if node.op in ("reduce", "dot"):
                n = node.args[0].shape[node.attrs[1]] if node.op == "reduce" else node.args[0].shape[-1]
                k, _ = bound_var(f"s{node.uid}", n)
                stack += [(a, arg_lanes(node, lanes, i, k)) for i, a in enumerate(node.args)]
                continue
            if node.op == "load":
                continue
            stack += [(a, arg_lanes(node, lanes, i)) for i, a in enumerate(node.args)]
    return out


def loop_fixpoint(values, run: str, loop: Loop, demanded: dict[str, tuple]) -> tuple[dict, dict, dict]:
    """(init classes, classes at iterations >= 1, classes after the loop) per carried variable."""
    ctx = values.ctx
    key = (run, loop.loop_id, ctx.key, tuple((n, _ids(v)) for n, v in sorted(demanded.items())))
    hit = values._fix.get(key)
    if hit is not None:
        return hit
    init = {n: values.kinds(loop.init[n], lanes, run) for n, lanes in demanded.items()}

    def transfer(state: dict, cls: z3.BoolRef) -> dict:
        values.env_stack.append((next_token(), {(run, loop.loop_id): state}))
        try:
            with ctx.assume(loop.in_range(), cls):
                return {n: values.kinds(loop.next[n], lanes, run) for n, lanes in demanded.items()}
        finally:
            values.env_stack.pop()

    empty = {n: frozenset() for n in demanded}
    later = transfer(init, loop.it == 0) if ctx.possible(z3.And(loop.in_range(), loop.it == 0)) else empty
    if ctx.possible(z3.And(loop.in_range(), loop.it >= 1)):
        for _ in range(_MAX_ROUNDS):
            step = transfer(later, loop.it >= 1)
            joined = {n: later[n] | step[n] for n in demanded}
            if joined == later:
                break
            later = joined
        else:
            later = {n: K.TOP for n in demanded}
    may_skip = ctx.possible(loop.trip == 0)
    after = {n: later[n] | (init[n] if may_skip else frozenset()) for n in demanded}
    values._fix[key] = (init, later, after)
    return values._fix[key]


def exit_kinds(values, run: str, node: FNode, lanes: tuple) -> frozenset:
    """Classes of a loop result element (``loopres`` node)."""
    ir = values.prob.launch(run).ir
    loop = ir.loops[node.data["loop"]]
    demanded = demanded_lanes(loop, {node.attrs[0]: lanes}, ir)
    return loop_fixpoint(values, run, loop, demanded)[2][node.attrs[0]]


def uncertain_guards(values, run: str, loop: Loop, demanded: dict[str, tuple]) -> list[tuple]:
    """Guards of max/min reductions that may hold on no lane at some later iteration.

    Such a guard (e.g. "this key is in the query's window") keeps the fixpoint from excluding
    the untouched initial state; :func:`forced_fixpoint` recovers the states after an iteration
    in which the guard surely held on some lane.
    """
    _, later, _ = loop_fixpoint(values, run, loop, demanded)
    values.uncertain = []
    try:
        _transfer(values, run, loop, demanded, later, loop.it >= 1)
        return list(values.uncertain)
    finally:
        values.uncertain = None


def _transfer(values, run: str, loop: Loop, demanded: dict, state: dict, cls: z3.BoolRef) -> dict:
    ctx = values.ctx
    values.env_stack.append((next_token(), {(run, loop.loop_id): state}))
    try:
        with ctx.assume(loop.in_range(), cls):
            return {n: values.kinds(loop.next[n], lanes, run) for n, lanes in demanded.items()}
    finally:
        values.env_stack.pop()


def forced_fixpoint(values, run: str, loop: Loop, demanded: dict, start: dict, guard: z3.BoolRef) -> dict:
    """States after one iteration in which ``guard`` holds on some lane, then any iterations."""
    values.forced = frozenset({guard.get_id()})
    try:
        state = _transfer(values, run, loop, demanded, start, loop.it >= 0)
    finally:
        values.forced = frozenset()
    for _ in range(_MAX_ROUNDS):
        step = _transfer(values, run, loop, demanded, state, loop.it >= 1)
        joined = {n: state[n] | step[n] for n in demanded}
        if joined == state:
            return state
        state = joined
    return {n: K.TOP for n in demanded}
