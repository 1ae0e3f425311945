"""Kernel-level cases of the run-time finiteness check (kernels/finiteness.py), for any implementation.

Each ``*_failures`` function takes the op under test (the CPU path, or the Triton kernel under
the interpreter) and returns what it got wrong, so a test can also show that a mutant check is
caught. Every case is a single launch with companion rows: the poisoned (token, head) must be
flagged, every other one must not, and a companion's output must not change in any bit.
"""

from __future__ import annotations

from typing import Callable

import torch

from tests.kernels.attention_cases import Request, Step, make_request, run_steps
from tests.kernels.invariance import bits_equal
from tests.kernels.reference import rope_table

# One (token, head) state store per segment: rows at positions 3, 130, 300 of a request, two
# of another, so the merge reads 1, 2 and 3 segments of SEG = 128 (the float32 plan's SEG).
POSITIONS = (3, 130, 300, 0, 257)
BAD_VALUES = {"m": (float("nan"), float("inf"), float("-inf")), "l": (float("nan"), float("inf")),
              "acc": (float("nan"), float("-inf"))}

CombineOp = Callable[..., None]  # signature of kernels.cpu_attention.attention_combine


def _combine_inputs(num_heads: int, head_dim: int, seg: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Finite segment states for POSITIONS (two requests), laid out as the first half stores them."""
    lens = [301, 258]  # KV lengths; queries: the three (two) rows listed, as if prefilled there
    num_segs = -(-max(lens) // seg)
    num_tokens = len(POSITIONS)
    m = torch.randn(num_tokens, num_heads, num_segs, generator=gen)
    l = torch.rand(num_tokens, num_heads, num_segs, generator=gen) + 1.0
    acc = torch.randn(num_tokens, num_heads, num_segs, head_dim, generator=gen)
    # positions are not consecutive, so give each row its own request of one query each
    seq_lens = torch.tensor([p + 1 for p in POSITIONS], dtype=torch.int32)
    query_start_loc = torch.arange(num_tokens + 1, dtype=torch.int32)
    seq_idx = torch.arange(num_tokens, dtype=torch.int32)
    return {"m": m, "l": l, "acc": acc, "query_start_loc": query_start_loc, "seq_lens": seq_lens,
            "seq_idx": seq_idx}


def combine_flag_failures(combine: CombineOp, entry, *, dtype: torch.dtype = torch.float32, seed: int = 0,
                          device: str = "cpu") -> list[str]:
    """Every (token, head, merged segment, field, value) poisoned alone is flagged at exactly that
    (token, head); a poisoned segment past the token's own is not read, so flags nothing."""
    c = entry.constexpr_dict()
    num_heads, head_dim, seg = entry.static_dict()["num_heads"], c["D"], c["SEG"]
    base = {k: v.to(device) for k, v in _combine_inputs(num_heads, head_dim, seg,
                                                        torch.Generator().manual_seed(seed)).items()}
    num_tokens, num_segs = base["m"].shape[0], base["m"].shape[2]

    def run(inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        out = torch.empty(num_tokens, num_heads, head_dim, dtype=dtype, device=device)
        flags = torch.full((num_tokens, num_heads), -1.0, device=device)
        combine(inputs["m"], inputs["l"], inputs["acc"], inputs["query_start_loc"], inputs["seq_lens"],
                inputs["seq_idx"], out, flags, entry)
        return out.cpu(), flags.cpu()

    clean_out, clean_flags = run(base)
    failures = [] if bool((clean_flags == 0).all()) else [f"finite states flagged: {clean_flags.tolist()}"]
    for t, position in enumerate(POSITIONS):
        for h in range(num_heads):
            for s in range(num_segs):
                for field, values in BAD_VALUES.items():
                    for value in values:
                        inputs = {k: v.clone() for k, v in base.items()}
                        inputs[field][t, h, s] = value  # acc: every element of the row
                        out, flags = run(inputs)
                        expected = torch.zeros_like(flags)
                        if s <= position // seg:
                            expected[t, h] = 1.0
                        where = f"row {t} (position {position}) head {h} segment {s} {field}={value}"
                        if not torch.equal(flags, expected):
                            failures.append(f"{where}: flags {flags.tolist()}")
                        others = torch.ones(num_tokens, num_heads, dtype=torch.bool)
                        others[t, h] = False
                        if not bits_equal(out[others], clean_out[others]):
                            failures.append(f"{where}: another (token, head)'s output changed")
    return failures


StoreOp = Callable[..., None]  # signature of kernels.cpu_ops.rope_store_kv


def rope_store_kv_flag_failures(store: StoreOp, entry, *, dtype: torch.dtype = torch.float32, seed: int = 0,
                                device: str = "cpu") -> list[str]:
    """A K or V row with one inf or NaN element is flagged at exactly its (token, head); a q row never is."""
    c, static = entry.constexpr_dict(), entry.static_dict()
    q_heads, heads, dim, page_size = static["num_heads"], static["num_kv_heads"], 2 * c["HALF"], c["PAGE_SIZE"]
    gen = torch.Generator().manual_seed(seed)
    num_tokens = 5
    q, k, v = (torch.randn(num_tokens, n, dim, generator=gen).to(dtype) for n in (q_heads, heads, heads))
    positions = torch.tensor([0, 3, 1, 7, 2], device=device)
    table = rope_table(8, dim, 10000.0).to(device)
    slots = torch.tensor([31, 0, 9, 8, 17], device=device)

    def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        k_cache, v_cache = torch.zeros(2, page_size, heads, dim, dtype=dtype, device=device), \
            torch.zeros(2, page_size, heads, dim, dtype=dtype, device=device)
        flags = torch.full((num_tokens, heads), -1.0, device=device)
        store(q.to(device), k.to(device), v.to(device), positions, table, torch.empty(q.shape, dtype=dtype,
              device=device), k_cache, v_cache, slots, flags, entry)
        return flags.cpu()

    failures = [] if bool((run(q, k, v) == 0).all()) else ["finite rows flagged"]
    for t in range(num_tokens):
        qq = q.clone()
        qq[t, t % q_heads, 1] = float("nan")
        if not bool((run(qq, k, v) == 0).all()):
            failures.append(f"q row {t} = nan flagged a K/V row")
        for h in range(heads):
            for name in ("k", "v"):
                for value in (float("nan"), float("inf"), float("-inf")):
                    kk, vv = k.clone(), v.clone()
                    (kk if name == "k" else vv)[t, h, (t * 7 + h) % dim] = value
                    flags = run(q, kk, vv)
                    expected = torch.zeros_like(flags)
                    expected[t, h] = 1.0
                    if not torch.equal(flags, expected):
                        failures.append(f"{name} row {t} head {h} = {value}: flags {flags.tolist()}")
    return failures


def _poisoned(request: Request, kind: str, position: int) -> Request:
    """``request`` with position ``position`` of q, k or v broken (or q and k scaled to overflow)."""
    q, k, v = request.q.clone(), request.k.clone(), request.v.clone()
    if kind == "q_nan":
        q[position, 0, 1] = float("nan")
    elif kind == "q_inf":
        q[position, -1, 0] = float("inf")
    elif kind == "k_nan":
        k[position, 0, 2] = float("nan")
    elif kind == "v_inf":
        v[position, 0, 3] = float("-inf")
    elif kind == "overflow":  # finite q and k whose dot product exceeds the float32 range
        q[position] = 1e20
        k[position] = 1e20
    else:
        raise ValueError(kind)
    return Request(q, k, v)


ATTENTION_KINDS = ("q_nan", "q_inf", "k_nan", "v_inf", "overflow")


def attention_flag_failures(attention: Callable[..., torch.Tensor], *, num_heads: int, num_kv_heads: int,
                            head_dim: int, page_size: int, dtype: torch.dtype = torch.float32,
                            seed: int = 0, device: str = "cpu") -> list[str]:
    """Poison one position of a prefill chunk beside two companions in one launch: the rows that
    read it are flagged, no companion row is, and the companions' outputs keep every bit."""
    scale = head_dim ** -0.5
    gen = torch.Generator().manual_seed(seed)
    victim = make_request(150, num_heads, num_kv_heads, head_dim, dtype, gen)
    first, second = (make_request(n, num_heads, num_kv_heads, head_dim, dtype, gen) for n in (40, 140))
    companions = [Step(first, 39, 40), Step(second, 100, 140)]  # a decode row and a chunk
    failures = []

    def run(request: Request, kind: str) -> tuple[list[torch.Tensor], torch.Tensor]:
        captured: list[torch.Tensor] = []

        def flagged(*args):
            flags = torch.full((args[0].shape[0], num_heads), -1.0, device=args[0].device)
            captured.append(flags)
            return attention(*args, nonfinite=flags)
        outs = run_steps([companions[0], Step(request, 120, 150), companions[1]], page_size=page_size, scale=scale,
                         gen=torch.Generator().manual_seed(seed), poison="nan", device=device, attention=flagged)
        return outs, captured[0].cpu()

    clean, clean_flags = run(victim, "clean")
    if not bool((clean_flags == 0).all()):
        failures.append(f"a clean launch (NaN in unwritten slots only) is flagged: {clean_flags.tolist()}")
    rows = [1, 30, 40]  # row counts of the three steps
    victim_rows = slice(rows[0], rows[0] + rows[1])
    for kind in ATTENTION_KINDS:
        position = 133  # inside the victim's chunk [120, 150)
        outs, flags = run(_poisoned(victim, kind, position), kind)
        flagged_rows = flags.amax(dim=1)
        for i, expected in ((0, clean[0]), (2, clean[2])):
            if not bits_equal(outs[i], expected):
                failures.append(f"{kind}: companion {i}'s output changed")
        companion_flags = torch.cat([flagged_rows[:rows[0]], flagged_rows[rows[0] + rows[1]:]])
        if bool((companion_flags != 0).any()):
            failures.append(f"{kind}: a companion row is flagged")
        victim_flags = flagged_rows[victim_rows]
        # rows at or past a poisoned K/V position read it; a poisoned q row, or the one score that
        # overflows (q and k of the same position), breaks only its own row
        own_row = kind in ("q_nan", "q_inf", "overflow")
        must = [position - 120] if own_row else list(range(position - 120, 30))
        missed = [120 + r for r in must if victim_flags[r] != 1]
        if missed:
            failures.append(f"{kind}: positions {missed} read the poisoned row but are not flagged")
        if own_row and bool((torch.cat([victim_flags[:13], victim_flags[14:]]) != 0).any()):
            failures.append(f"{kind}: rows other than the poisoned query are flagged")
    return failures
