"""``for`` loops in the front end: iteration variables and loop-carried state.

A loop body is evaluated twice. The first pass runs with placeholders (``init + drift`` for
integers and pointers, a ``carried`` FNode for floats) to find each integer recurrence; a
recurrence ``x' = x + delta`` with ``delta`` independent of the iteration becomes the closed
form ``init + it*delta`` (e.g. ``a_ptrs += BLOCK_K * stride_ak``). Any other integer
recurrence stays opaque (an uninterpreted function of the iteration), so an obligation that
needs it fails instead of passing silently. The second pass records the real IR.
``tl.static_range`` is unrolled, as Triton unrolls it.
"""

from __future__ import annotations

import ast
import builtins

import z3

from proofs import tiles
from proofs.errors import Unsupported
from proofs.tir import AX, BoolVal, FNode, IntVal, Loop, PtrVal

__all__ = ["exec_for", "assigned_names"]

_MAX_UNROLL = 256


def assigned_names(stmts: list[ast.stmt]) -> list[str]:
    """Names assigned anywhere in ``stmts`` (in first-assignment order)."""
    out: list[str] = []
    for stmt in stmts:
        for node in ast.walk(stmt):
            targets = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)):
                targets = [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name) and n.id not in out:
                        out.append(n.id)
    return out


def _constexpr_in_loop(node: ast.For, name: str) -> bool:
    """Whether every assignment to ``name`` in the loop is a literal (then it stays a constexpr)."""
    for stmt in ast.walk(node):
        if isinstance(stmt, (ast.Assign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                if not isinstance(stmt.value, ast.Constant) or isinstance(stmt, ast.AugAssign):
                    return False
    return True


def _bounds(ip, node: ast.For) -> tuple[str, list]:
    call = node.iter
    if not isinstance(call, ast.Call):
        raise Unsupported("for loop", node.lineno, "only range(...), tl.range(...) and tl.static_range(...)")
    func = ip.eval(call.func)
    kind = "range" if func is builtins.range else getattr(func, "path", None)
    if kind not in ("range", "static_range"):
        raise Unsupported("for loop", node.lineno, f"iterating over {ast.unparse(call.func)}")
    args = [ip.eval(a) for a in call.args]
    ignored = [k.arg for k in call.keywords]
    if ignored:
        ip.ir.notes.append(f"line {node.lineno}: loop options {', '.join(ignored)} only schedule the loop")
    if len(args) == 1:
        args = [0, args[0], 1]
    elif len(args) == 2:
        args = [args[0], args[1], 1]
    return kind, args


def _unroll(ip, node: ast.For, lo, hi, step) -> None:
    if not all(isinstance(v, int) for v in (lo, hi, step)):
        raise Unsupported("tl.static_range", node.lineno, "bounds must be constexprs")
    values = range(lo, hi, step)
    if len(values) > _MAX_UNROLL:
        raise Unsupported("tl.static_range", node.lineno, f"{len(values)} iterations (limit {_MAX_UNROLL})")
    for v in values:
        ip.env[node.target.id] = v
        ip.exec_block(node.body)


def _placeholder(loop_id: int, name: str, value, run: str, line: int):
    if isinstance(value, FNode):
        return FNode("carried", value.shape, value.dtype, attrs=(name,), data={"loop": loop_id}, line=line)
    drift = z3.Int(f"drift{loop_id}_{name}@{run}")
    if isinstance(value, IntVal):
        return IntVal(value.term + drift, value.shape, value.width, False)
    if isinstance(value, PtrVal):
        return PtrVal(value.tensor, value.offset + drift, value.shape, value.width)
    if isinstance(value, BoolVal):
        raise Unsupported("loop-carried mask", line, name)
    return value


def _term(v):
    return v.term if isinstance(v, IntVal) else v.offset


def _closed_form(loop: Loop, name: str, init, nxt, run: str, line: int):
    """Closed form of an integer/pointer recurrence, or an opaque term."""
    if type(nxt) is not type(init) or (isinstance(init, PtrVal) and nxt.tensor != init.tensor) \
            or tuple(nxt.shape) != tuple(init.shape):
        raise Unsupported("loop-carried value", line, f"{name} changes type or shape in the loop")
    drift = z3.Int(f"drift{loop.loop_id}_{name}@{run}")
    delta = z3.simplify(_term(nxt) - (_term(init) + drift))
    names = {str(d) for d in z3.z3util.get_vars(delta)} if not z3.is_int_value(delta) else set()
    if str(drift) not in names and str(loop.it) not in names and not any(n.startswith("drift") for n in names):
        return delta
    loop.opaque_ints.append(name)
    return None


def _rebuild(init, term):
    if isinstance(init, IntVal):
        return IntVal(term, init.shape, init.width, False)
    return PtrVal(init.tensor, term, init.shape, init.width)


def exec_for(ip, node: ast.For) -> None:
    """Evaluate a ``for`` statement into a :class:`Loop` (or unroll a static range)."""
    if node.orelse or not isinstance(node.target, ast.Name):
        raise Unsupported("for loop", node.lineno, "needs a single loop variable and no else")
    kind, (lo, hi, step) = _bounds(ip, node)
    if kind == "static_range":
        return _unroll(ip, node, lo, hi, step)
    if isinstance(step, int) and step <= 0:
        raise Unsupported("for loop", node.lineno, f"step {step} is not positive")
    lo_v, hi_v, step_v = (tiles.int_term(v, node.lineno) for v in (lo, hi, step))
    if lo_v.shape or hi_v.shape or step_v.shape:
        raise Unsupported("for loop", node.lineno, "bounds must be scalars")
    loop_id = ip.next_loop_id
    ip.next_loop_id += 1
    it = z3.Int(f"it{loop_id}_L{node.lineno}@{ip.run}")
    loop = Loop(loop_id, node.lineno, it, lo_v.term, hi_v.term, step_v.term, step if isinstance(step, int) else None,
                ip.loop_stack[-1] if ip.loop_stack else None)
    width = max(lo_v.width, hi_v.width)
    loop_var = IntVal(lo_v.term + it * step_v.term, (), width, lo_v.nonneg and step_v.nonneg)
    carried = [n for n in assigned_names(node.body) if n in ip.env and n != node.target.id]
    for n in carried:  # a Python number reassigned with tiles in the loop is a scalar tile (as in Triton)
        v = ip.env[n]
        if isinstance(v, float):
            ip.env[n] = FNode("const", (), "float32", attrs=(v,), line=node.lineno)
        elif isinstance(v, int) and not isinstance(v, bool) and not _constexpr_in_loop(node, n):
            ip.env[n] = tiles.int_term(v, node.lineno)
    before = dict(ip.env)
    holders = {n: _placeholder(loop_id, n, before[n], ip.run, node.lineno) for n in carried}

    saved_recording = ip.recording
    ip.recording = False
    ip.loop_stack.append(loop_id)
    ip.env.update(holders)
    ip.env[node.target.id] = loop_var
    ip.exec_block(node.body)
    closed = {}
    for n in carried:
        init, nxt = before[n], ip.env[n]
        if isinstance(init, (IntVal, PtrVal)):
            delta = _closed_form(loop, n, init, nxt, ip.run, node.lineno)
            if delta is None:
                shape = init.shape
                f = z3.Function(f"opaque{loop_id}_{n}@{ip.run}", *([z3.IntSort()] * (len(shape) + 2)))
                closed[n] = _rebuild(init, f(it, *AX[:len(shape)]))
            else:
                closed[n] = _rebuild(init, _term(init) + it * delta)
                if isinstance(init, IntVal) and init.width == 32:
                    # an i32 value accumulated over the iterations must not wrap (pointers add to 64 bits)
                    ip.ir.widths[closed[n].term.get_id()] = (32, node.lineno)
                    ip.ir.keep.append(closed[n].term)
        elif isinstance(init, FNode):
            closed[n] = holders[n]
        elif nxt is not init and nxt != init:
            raise Unsupported("constexpr reassigned in a loop", node.lineno, n)
    ip.env = dict(before)
    ip.recording = saved_recording

    ip.env.update(closed)
    ip.env[node.target.id] = loop_var
    ip.exec_block(node.body)
    after = ip.env
    ip.loop_stack.pop()
    ip.env = dict(before)
    for n in carried:
        init = before[n]
        if isinstance(init, FNode):
            nxt = after[n]
            if not isinstance(nxt, FNode) or tuple(nxt.shape) != tuple(init.shape):
                raise Unsupported("loop-carried value", node.lineno, f"{n} changes type or shape in the loop")
            loop.init[n], loop.next[n], loop.carried[n] = init, nxt, holders[n]
            ip.env[n] = FNode("loopres", init.shape, nxt.dtype, attrs=(n,), data={"loop": loop_id}, line=node.lineno)
        elif isinstance(init, (IntVal, PtrVal)):
            if n in loop.opaque_ints:
                f = z3.Function(f"opaque_exit{loop_id}_{n}@{ip.run}", *([z3.IntSort()] * (len(init.shape) + 1)))
                ip.env[n] = _rebuild(init, f(*AX[:len(init.shape)]) if init.shape else f(z3.IntVal(0)))
            else:
                trip = loop.trip
                ip.env[n] = _rebuild(init, z3.substitute(_term(closed[n]), (it, trip)))
    if ip.recording:
        ip.ir.loops[loop_id] = loop
    return None
