"""A padded decode step's tokens in and outputs out, as two launches inside its CUDA graph.

On CUDA a step's sampled rows, greedy tokens, input tokens and finiteness flags go to one of the
host-logits device slots (engine/host_logits.py), from which one copy brings them to the host;
a step launched ahead reads its tokens from the slot of the step before. Which slot a step
writes and which it reads are device values staged with the step's inputs, so one captured
graph serves every slot, and the copies that would otherwise run between replays (the token
gather and four slot copies) run inside the graph. Copies only: not plan kernels, no value of
the model is computed here.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from triton import knobs

__all__ = ["DeviceSlots", "put_outputs", "put_outputs_kernel", "take_tokens", "take_tokens_kernel"]


@dataclass(frozen=True, slots=True)
class DeviceSlots:
    """Typed views of every device slot, slot first (strided views of one block of bytes)."""

    logits: torch.Tensor  # [N, R, V] float32
    tokens: torch.Tensor  # [N, R] int64 greedy tokens
    inputs: torch.Tensor  # [N, R] int64 input tokens
    flags: torch.Tensor  # [N, F] float32 finiteness flags


@triton.jit
def take_tokens_kernel(ids_ptr, source_rows_ptr, slots_ptr, slot_tokens_ptr, slot_stride, num_rows,
                       BLOCK: tl.constexpr):
    # ids: [S] int64, staged; source_rows: [S] int64 (-1: keep the staged id);
    # slots: [2] int64 (the slot this step writes, the slot its tokens come from); slot_tokens: [N, R] int64
    offs = tl.arange(0, BLOCK)
    is_row = offs < num_rows
    source = tl.load(source_rows_ptr + offs, mask=is_row, other=-1)
    is_taken = is_row & (source >= 0)
    slot = tl.load(slots_ptr + 1)
    taken = tl.load(slot_tokens_ptr + slot * slot_stride + source, mask=is_taken, other=0)
    staged = tl.load(ids_ptr + offs, mask=is_row, other=0)
    tl.store(ids_ptr + offs, tl.where(is_taken, taken, staged), mask=is_row)


@triton.jit
def put_outputs_kernel(logits_ptr, tokens_ptr, ids_ptr, flags_ptr, slots_ptr, slot_logits_ptr, slot_tokens_ptr,
                       slot_inputs_ptr, slot_flags_ptr, logits_row_stride, slot_logits_stride, slot_row_stride,
                       slot_tokens_stride, slot_flags_stride, vocab_size, BLOCK: tl.constexpr):
    # logits: [S, V] float32; tokens, ids: [S] int64; flags: [S] float32; slots: [2] int64 (a negative
    # slot: the outputs go nowhere); slot_*: DeviceSlots' views. One program per (row, block of V).
    row = tl.program_id(0)
    block = tl.program_id(1)
    slot = tl.load(slots_ptr)
    is_on = slot >= 0
    offs = block * BLOCK + tl.arange(0, BLOCK)
    is_in = (offs < vocab_size) & is_on
    x = tl.load(logits_ptr + row * logits_row_stride + offs, mask=is_in, other=0.0)
    tl.store(slot_logits_ptr + slot * slot_logits_stride + row * slot_row_stride + offs, x, mask=is_in)
    if block == 0:
        tl.store(slot_tokens_ptr + slot * slot_tokens_stride + row, tl.load(tokens_ptr + row), mask=is_on)
        tl.store(slot_inputs_ptr + slot * slot_tokens_stride + row, tl.load(ids_ptr + row), mask=is_on)
        tl.store(slot_flags_ptr + slot * slot_flags_stride + row, tl.load(flags_ptr + row), mask=is_on)


def _check_slots(slots: torch.Tensor, device_slots: DeviceSlots) -> None:
    assert slots.shape == (2,) and slots.dtype == torch.int64, \
        f"slots must be [2] int64, got {tuple(slots.shape)} {slots.dtype}"
    t = device_slots
    assert t.logits.dtype == torch.float32 and t.flags.dtype == torch.float32, "slot rows and flags are float32"
    assert t.tokens.dtype == torch.int64 and t.inputs.dtype == torch.int64, "slot tokens are int64"
    assert t.logits.stride(2) == 1 and t.tokens.stride(1) == 1 and t.flags.stride(1) == 1, "slot rows need unit stride"
    assert t.tokens.stride() == t.inputs.stride(), "slot tokens and input tokens share one layout"
    assert all(x.device == slots.device for x in (t.logits, t.tokens, t.inputs, t.flags)), "one device for all"
    assert knobs.runtime.interpret or slots.is_cuda, "step io runs on CUDA (or under the Triton interpreter)"


def take_tokens(ids: torch.Tensor, source_rows: torch.Tensor, slots: torch.Tensor, device_slots: DeviceSlots) -> None:
    """Row ``i`` of ``ids`` [S] int64 becomes ``device_slots.tokens[slots[1], source_rows[i]]`` where
    ``source_rows[i] >= 0``; other rows keep their staged id."""
    _check_slots(slots, device_slots)
    (num_rows,) = ids.shape
    assert ids.dtype == torch.int64 and source_rows.dtype == torch.int64, "ids and source rows are int64"
    assert source_rows.shape == (num_rows,), f"one source row per id, got {source_rows.shape} for {num_rows}"
    assert ids.stride(0) == 1 and source_rows.stride(0) == 1, "ids and source rows need unit stride"
    assert num_rows <= device_slots.tokens.shape[1], f"{num_rows} rows exceed a slot's {device_slots.tokens.shape[1]}"
    if num_rows:
        take_tokens_kernel[(1,)](ids, source_rows, slots, device_slots.tokens, device_slots.tokens.stride(0), num_rows,
                                 BLOCK=triton.next_power_of_2(num_rows), num_warps=1)


def put_outputs(logits: torch.Tensor, tokens: torch.Tensor, ids: torch.Tensor, flags: torch.Tensor,
                slots: torch.Tensor, device_slots: DeviceSlots, *, block: int = 4096) -> None:
    """Copy ``logits`` [S, V] float32, greedy ``tokens`` [S] int64, input ``ids`` [S] int64 and
    ``flags`` [S] float32 into the first S rows of device slot ``slots[0]`` (nowhere if it is negative)."""
    _check_slots(slots, device_slots)
    num_rows, vocab_size = logits.shape
    assert logits.dtype == torch.float32 and logits.stride(1) == 1, "logits are float32 rows of unit stride"
    assert tokens.shape == ids.shape == flags.shape == (num_rows,), "one token, input id and flag per row"
    assert tokens.dtype == ids.dtype == torch.int64 and flags.dtype == torch.float32, "int64 tokens, float32 flags"
    assert tokens.stride(0) == ids.stride(0) == flags.stride(0) == 1, "tokens, ids and flags need unit stride"
    assert device_slots.logits.shape[1:] == (device_slots.tokens.shape[1], vocab_size), "slot rows of this vocabulary"
    assert num_rows <= device_slots.tokens.shape[1] and num_rows <= device_slots.flags.shape[1], "rows exceed a slot"
    assert block & (block - 1) == 0, f"block must be a power of two, got {block}"
    if num_rows:
        put_outputs_kernel[(num_rows, triton.cdiv(vocab_size, block))](
            logits, tokens, ids, flags, slots, device_slots.logits, device_slots.tokens, device_slots.inputs,
            device_slots.flags, logits.stride(0), device_slots.logits.stride(0), device_slots.logits.stride(1),
            device_slots.tokens.stride(0), device_slots.flags.stride(0), vocab_size, BLOCK=block, num_warps=4)
