"""The ``triton.language`` calls of the subset, evaluated into the tile IR."""

from __future__ import annotations

import ast
import builtins
from typing import Any

import z3

from proofs import tiles
from proofs.errors import Unsupported
from proofs.tir import AX, BoolVal, Dtype, FNode, IntVal, PtrVal
from proofs.tlmemory import broadcast_node, load, store, unify

__all__ = ["DTYPES", "call_tl", "call_method", "call_builtin", "trans"]


DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16", "float64": "float64",
          "int32": "int32", "int64": "int64", "int16": "int16", "int8": "int8", "uint8": "uint8",
          "uint32": "uint32", "int1": "int1", "float8e4nv": "float8e4nv", "float8e5": "float8e5",
          "fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
_UNARY = ("exp", "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "sigmoid", "cos", "sin", "abs", "erf", "tanh")
_IGNORED = ("device_assert", "device_print", "static_print", "debug_barrier")


def _dtype(v: Any, line: int) -> str:
    if isinstance(v, Dtype):
        return v.name
    if isinstance(v, str) and v in DTYPES:
        return DTYPES[v]
    raise Unsupported("dtype", line, repr(v))


def _const_int(v: Any, what: str, line: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise Unsupported(what, line, f"needs a constexpr integer, got {type(v).__name__}")
    return v


def _shape(v: Any, line: int) -> tuple[int, ...]:
    v = v if isinstance(v, tuple) else (v,)
    return tuple(_const_int(d, "tile shape", line) for d in v)


def _full(shape: tuple, value: Any, dtype: str, line: int) -> Any:
    if dtype in DTYPES.values() and not dtype.startswith(("float", "bfloat")):
        return IntVal(z3.IntVal(int(value)), shape, tiles.WIDTHS.get(dtype, 32), int(value) >= 0)
    node = FNode("const", (), dtype, attrs=(float(value),), line=line)
    if shape == ():
        return node
    amap = tuple([None] * len(shape))
    return FNode("view", shape, dtype, (node,), attrs=(amap,), line=line)


def trans(ip, x: FNode) -> FNode:
    if not isinstance(x, FNode) or len(x.shape) != 2:
        raise Unsupported("tl.trans", ip.line, "only 2-D float tiles")
    return FNode("view", (x.shape[1], x.shape[0]), x.dtype, (x,), attrs=((1, 0), "trans"), line=ip.line)


def _dot(ip, args: list, kw: dict, line: int) -> FNode:
    a, b = args[0], args[1]
    acc = args[2] if len(args) > 2 else kw.get("acc")
    if not (isinstance(a, FNode) and isinstance(b, FNode)) or len(a.shape) != 2 or len(b.shape) != 2:
        raise Unsupported("tl.dot", line, "operands must be 2-D float tiles")
    if a.shape[1] != b.shape[0]:
        raise Unsupported("tl.dot", line, f"shapes {list(a.shape)} x {list(b.shape)}")
    precision = kw.get("input_precision")
    if precision is None and kw.get("allow_tf32") is not None:
        precision = "tf32" if kw["allow_tf32"] else "ieee"
    out_dtype = _dtype(kw.get("out_dtype", "float32"), line)
    shape = (a.shape[0], b.shape[1])
    fargs = (a, b) if acc is None else (a, b, broadcast_node(tiles.as_fnode(acc, out_dtype, line), shape, line))
    return FNode("dot", shape, out_dtype, fargs, attrs=(precision or "default", out_dtype,
                                                        kw.get("max_num_imprecise_acc")), line=line)


def _reduce(ip, op: str, args: list, kw: dict, line: int) -> FNode:
    x = args[0]
    axis = args[1] if len(args) > 1 else kw.get("axis")
    if kw.get("return_indices"):
        raise Unsupported(f"tl.{op} with indices", line)
    if not isinstance(x, FNode):
        raise Unsupported(f"tl.{op}", line, "integer reductions are outside the subset")
    dtype = _dtype(kw["dtype"], line) if kw.get("dtype") is not None else x.dtype
    if op != "sum" and dtype in ("bfloat16", "float16"):
        dtype = "float32"  # tl.max/tl.min upcast 16-bit floats
    if dtype != x.dtype:
        x = FNode("cast", x.shape, dtype, (x,), attrs=(dtype,), line=line)
    if axis is None and len(x.shape) == 1:
        axis = 0
    if axis is not None:
        axis = _const_int(axis, "reduction axis", line) % len(x.shape)
        shape = x.shape[:axis] + x.shape[axis + 1:]
    else:
        shape = ()
    node = FNode("reduce", shape, dtype, (x,), attrs=(op, axis), line=line)
    if kw.get("keep_dims"):
        node = tiles.expand(node, axis if axis is not None else 0, line)
    return node


def _where(ip, cond: Any, x: Any, y: Any, line: int) -> Any:
    if isinstance(cond, bool):
        return x if cond else y
    floats = any(isinstance(v, FNode) or isinstance(v, float) for v in (x, y))
    if isinstance(cond, BoolVal) and not floats:
        shape, (c, a, b) = unify(ip, cond, tiles.int_term(x, line), tiles.int_term(y, line))
        return IntVal(z3.If(c.term, a.term, b.term), shape, max(a.width, b.width), a.nonneg and b.nonneg)
    dtype = next((v.dtype for v in (x, y) if isinstance(v, FNode) and v.dtype != "int1"), "float32")
    x, y = tiles.as_fnode(x, dtype, line), tiles.as_fnode(y, dtype, line)
    if isinstance(cond, BoolVal):
        shape, (c, a, b) = unify(ip, cond, x, y)
        return FNode("select", shape, tiles.promote(a.dtype, b.dtype), (broadcast_node(a, shape, line),
                     broadcast_node(b, shape, line)), data={"cond": c.term}, line=line)
    if isinstance(cond, FNode):
        shape, (c, a, b) = unify(ip, cond, x, y)
        return FNode("fselect", shape, tiles.promote(a.dtype, b.dtype),
                     tuple(broadcast_node(v, shape, line) for v in (c, a, b)), line=line)
    raise Unsupported("tl.where", line, f"condition of type {type(cond).__name__}")


def _cast(ip, x: Any, dtype: str, line: int) -> Any:
    if isinstance(x, FNode):
        if dtype.startswith(("float", "bfloat")):
            return x if dtype == x.dtype else FNode("cast", x.shape, dtype, (x,), attrs=(dtype,), line=line)
        raise Unsupported("float to integer conversion", line)
    if isinstance(x, (IntVal, BoolVal)) or isinstance(x, (int, bool)):
        if dtype.startswith(("float", "bfloat")):
            return tiles.as_fnode(tiles.int_term(x, line), dtype, line)
        v = tiles.int_term(x, line)
        width = tiles.WIDTHS.get(dtype, 32)
        if width < v.width and width == 32:
            ip.ir.widths[v.term.get_id()] = (32, line)
            ip.ir.keep.append(v.term)
        return IntVal(v.term, v.shape, width, v.nonneg)
    raise Unsupported("cast", line, f"of {type(x).__name__}")


def _grid_dependency(ip, path: str, line: int) -> None:
    """Programmatic dependent launch: no effect on values; the first wait splits the accesses
    into those before it and after it (checked in proofs/pdl.py)."""
    if ip.loop_stack:
        raise Unsupported(f"tl.{path}", line, "grid-dependency control inside a loop")
    if path.endswith("gdc_wait") and ip.ir.pdl_wait is None:
        ip.ir.pdl_wait, ip.ir.pdl_line = len(ip.ir.accesses), line
    return None


def call_tl(ip, path: str, args: list, kw: dict, node: ast.Call) -> Any:
    """Evaluate ``tl.<path>(*args, **kw)``."""
    line = node.lineno
    name = path.split(".")[-1] if path.startswith(("math.", "standard.")) else path
    if name == "program_id":
        axis = _const_int(args[0] if args else kw["axis"], "program_id axis", line)
        return IntVal(ip.ir.pids[axis], (), 32, True)
    if name == "num_programs":
        axis = _const_int(args[0] if args else kw["axis"], "num_programs axis", line)
        return IntVal(ip.ir.grid[axis], (), 32, True)
    if name == "arange":
        lo, hi = (_const_int(v, "tl.arange bound", line) for v in args[:2])
        if (hi - lo) & (hi - lo - 1) or hi <= lo:
            raise Unsupported("tl.arange", line, f"length {hi - lo} is not a power of two")
        # A 1-wide arange is the constant lo: its axis's lane variable is left unbounded (a size-1
        # axis is a broadcast one everywhere else), so it must not appear in the term
        return IntVal(z3.IntVal(lo) if hi - lo == 1 else AX[0] + lo, (hi - lo,), 32, lo >= 0)
    if name in ("zeros", "full"):
        shape = _shape(args[0] if args else kw["shape"], line)
        value = 0 if name == "zeros" else (args[1] if len(args) > 1 else kw["value"])
        dtype = _dtype(args[-1] if len(args) > (1 if name == "zeros" else 2) else kw["dtype"], line)
        return _full(shape, value, dtype, line)
    if name == "zeros_like":
        return _full(tuple(args[0].shape), 0, getattr(args[0], "dtype", "int32"), line)
    if name == "load":
        return load(ip, args, kw, line)
    if name == "store":
        return store(ip, args, kw, line)
    if name.startswith("atomic_"):
        return store(ip, args, kw, line, kind="atomic")
    if name == "dot":
        return _dot(ip, args, kw, line)
    if name in ("sum", "max", "min"):
        return _reduce(ip, name, args, kw, line)
    if name == "where":
        return _where(ip, *args[:3], line)
    if name in ("maximum", "minimum"):
        if kw.get("propagate_nan") not in (None, "none", "NONE"):
            raise Unsupported(f"tl.{name} with propagate_nan", line)
        op = "max" if name == "maximum" else "min"
        if any(isinstance(v, (FNode, float)) for v in args):
            return tiles.float_binop(op, args[0], args[1], line)
        return tiles.int_binop(op, args[0], args[1], line, ip.ir)
    if name == "fdiv" or name == "div_rn":
        return tiles.float_binop("div", args[0], args[1], line)
    if name in _UNARY:
        x = args[0]
        if name == "abs" and not isinstance(x, FNode):
            v = tiles.int_term(x, line)
            return IntVal(z3.If(v.term >= 0, v.term, -v.term), v.shape, v.width, True)
        if not isinstance(x, FNode):
            raise Unsupported(f"tl.{name}", line, "needs a float tile")
        op = "sqrt" if name == "sqrt_rn" else name
        return FNode("unary", x.shape, x.dtype, (x,), attrs=(op,), line=line)
    if name == "fma":
        shape, vals = unify(ip, *args)
        return FNode("fma", shape, vals[0].dtype, tuple(broadcast_node(v, shape, line) for v in vals), line=line)
    if name == "cdiv" or path == "@triton.cdiv":
        a, b = args
        if isinstance(a, int) and isinstance(b, int):
            return (a + b - 1) // b
        return tiles.int_binop("floordiv", tiles.int_binop("sub", tiles.int_binop("add", a, b, line, ip.ir), 1,
                                                            line, ip.ir), b, line, ip.ir)
    if name in ("multiple_of", "max_contiguous", "max_constancy"):
        x, v = args[0], args[1]
        if isinstance(x, IntVal) and ip.recording:
            vs = v if isinstance(v, tuple) else (v,)
            ip.ir.hints.append((x.term, int(vs[-1]), line, x.shape, tuple(ip.loop_stack), name))
        return x
    if name == "static_assert":
        if not args[0]:
            raise Unsupported("static assertion failure", line, ast.unparse(node.args[0]))
        return None
    if path in ("extra.cuda.gdc_wait", "extra.cuda.gdc_launch_dependents"):
        return _grid_dependency(ip, path, line)
    if name in _IGNORED:
        ip.ir.notes.append(f"line {line}: tl.{name} ignored (no effect on values)")
        return None
    if name == "cast":
        return _cast(ip, args[0], _dtype(args[1] if len(args) > 1 else kw["dtype"], line), line)
    if name == "trans":
        return trans(ip, args[0])
    if name == "broadcast_to":
        shape = _shape(args[1:] if len(args) > 2 else args[1], line)
        x = args[0]
        if isinstance(x, FNode):
            return broadcast_node(x, shape, line)
        return tiles.align(x, len(shape))
    if name == "constexpr":
        return args[0]
    raise Unsupported(f"tl.{path}", line)


def call_method(ip, m: Any, args: list, kw: dict, node: ast.Call) -> Any:
    line = node.lineno
    if m.name == "to":
        if kw.get("bitcast"):
            raise Unsupported("bitcast", line)
        return _cast(ip, m.obj, _dtype(args[0] if args else kw["dtype"], line), line)
    if m.name == "trans":
        return trans(ip, m.obj)
    if m.name in ("sum", "max", "min"):
        return _reduce(ip, m.name, [m.obj, *args], kw, line)
    raise Unsupported(f"method .{m.name}", line)


def call_builtin(ip, fn: Any, args: list, node: ast.Call) -> Any:
    line = node.lineno
    if all(not isinstance(a, (FNode, IntVal, BoolVal, PtrVal)) for a in args):
        return fn(*args)
    if fn in (builtins.min, builtins.max) and len(args) == 2:
        op = "min" if fn is builtins.min else "max"
        if any(isinstance(v, FNode) for v in args):
            return tiles.float_binop(op, args[0], args[1], line)
        return tiles.int_binop(op, args[0], args[1], line, ip.ir)
    raise Unsupported(f"builtin {fn.__name__} on a runtime value", line)
