"""Memory operations of the subset: ``tl.load``, ``tl.store`` and the atomics, into the tile IR.

A float load becomes a ``load`` FNode carrying its offset and mask terms; an integer load becomes
the uninterpreted contents of that tensor at the load's logical index (split with the tensor's
layout), ``If(mask, contents, other)``. Masks must be integer conditions. Every site is also
recorded as an :class:`~proofs.tir.Access` for the safety and writer passes.
"""

from __future__ import annotations

from typing import Any

import z3

from proofs import tiles
from proofs.errors import Unsupported
from proofs.layout import decompose
from proofs.tir import AX, Access, BoolVal, FNode, IntVal, PtrVal

__all__ = ["load", "store", "unify", "broadcast_node", "layout_problem"]


def layout_problem(tensor: str, offset: z3.ExprRef, strides: tuple) -> str:
    """Why an offset cannot be split into logical indices (for UNSUPPORTED messages)."""
    if "opaque" in offset.sexpr():
        return f"the offset of {tensor} uses a loop-carried integer that is not an affine recurrence"
    return f"the offset of {tensor} does not split into indices of its layout (strides {list(strides)})"

def unify(ip, *vals: Any) -> tuple:
    shape: tuple = ()
    for v in vals:
        shape = tiles.broadcast_shapes(shape, getattr(v, "shape", ()), ip.line)
    return shape, [tiles.align(v, len(shape)) if hasattr(v, "shape") else v for v in vals]


def broadcast_node(v: FNode, shape: tuple, line: int) -> FNode:
    v = tiles.align(v, len(shape))
    if v.shape == shape:
        return v
    return FNode("view", shape, v.dtype, (v,), attrs=(tuple(k if v.shape[k] == shape[k] else None
                                                            for k in range(len(shape))),), line=line)


def _check_mask(mask: Any, what: str, line: int) -> None:
    if isinstance(mask, FNode):
        raise Unsupported(f"{what} with a mask computed from float values", line,
                          "masks must be integer conditions (positions, lengths)")


def load(ip, args: list, kw: dict, line: int) -> Any:
    ptr = args[0] if args else kw.get("pointer")
    mask = args[1] if len(args) > 1 else kw.get("mask")
    other = args[2] if len(args) > 2 else kw.get("other")
    _check_mask(mask, "tl.load", line)
    if kw.get("boundary_check") or kw.get("padding_option"):
        raise Unsupported("block-pointer load", line)
    if not isinstance(ptr, PtrVal):
        raise Unsupported("tl.load", line, "the pointer must be a tensor argument plus an offset")
    if isinstance(mask, bool):
        mask = None if mask else BoolVal(z3.BoolVal(False))
    shape, (ptr, mask_v) = unify(ip, ptr, mask) if mask is not None else (ptr.shape, (ptr, None))
    mterm = mask_v.term if mask_v is not None else None
    spec = ip.contract.tensors[ptr.tensor]
    access = Access("load", ptr.tensor, ptr.offset, mterm, shape, line, tuple(ip.loop_stack),
                    has_other=other is not None or mask is None, site=ip.next_site)
    ip.next_site += 1
    if ip.recording:
        ip.ir.accesses.append(access)
    if spec.is_float:
        fargs = ()
        if other is not None:
            fargs = (broadcast_node(tiles.as_fnode(other, spec.dtype, line), shape, line),)
        return FNode("load", shape, spec.dtype, fargs, attrs=(ptr.tensor,),
                     data={"offset": ptr.offset, "mask": mterm, "access": access}, line=line)
    strides = tuple(ip.names.expr(s) if isinstance(s, str) else s for s in spec.strides)
    idx = decompose(ptr.offset, strides)
    if idx is None:
        raise Unsupported("integer load", line, layout_problem(ptr.tensor, ptr.offset, spec.strides))
    term = ip.names.uf(ptr.tensor)(*idx)
    if mterm is not None:
        if other is None:
            undef = z3.Function(f"undef{access.site}@{ip.run}", *([z3.IntSort()] * (len(shape) + 1)))
            fill = undef(*AX[:len(shape)]) if shape else z3.Int(f"undef{access.site}@{ip.run}")
        else:
            fill = tiles.int_term(other, line).term
        term = z3.If(mterm, term, fill)
    return IntVal(term, shape, tiles.WIDTHS.get(spec.dtype, 32), False)


def store(ip, args: list, kw: dict, line: int, kind: str = "store") -> Any:
    ptr = args[0] if args else kw.get("pointer")
    value = args[1] if len(args) > 1 else kw.get("value") if "value" in kw else kw.get("val")
    mask = args[2] if len(args) > 2 else kw.get("mask")
    _check_mask(mask, f"tl.{kind}", line)
    if not isinstance(ptr, PtrVal):
        raise Unsupported(f"tl.{kind}", line, "the pointer must be a tensor argument plus an offset")
    if isinstance(mask, bool):
        mask = None if mask else BoolVal(z3.BoolVal(False))
    spec = ip.contract.tensors[ptr.tensor]
    shape, (ptr, mask_v) = unify(ip, ptr, mask) if mask is not None else (ptr.shape, (ptr, None))
    if spec.is_float or isinstance(value, FNode):
        value = broadcast_node(tiles.as_fnode(value, spec.dtype, line), shape, line)
    else:
        value = tiles.align(tiles.int_term(value, line), len(shape))
    access = Access(kind, ptr.tensor, ptr.offset, mask_v.term if mask_v is not None else None, shape, line,
                    tuple(ip.loop_stack), value=value, site=ip.next_site)
    ip.next_site += 1
    if ip.recording:
        ip.ir.accesses.append(access)
    if kind == "atomic":
        return FNode("atomic", shape, spec.dtype, attrs=(ptr.tensor,), line=line)
    return None
