"""Row-invariance checking shared by the CPU, interpreter and GPU kernel tests.

``row_invariance_failures`` runs an op on the selected rows alone, then on batches that embed
the same rows at other positions among filler rows of a given kind, and reports every batch
whose selected output rows are not bitwise equal to the reference. The negative-control tests
feed it non-invariant matmuls to show it detects what it claims to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from hypothesis import strategies as st

FILLS = ("random", "zero", "huge", "nan")
HUGE = 3.0e38  # finite in float32 and bfloat16


@dataclass(frozen=True)
class Case:
    """One batch: its size, where the selected rows start, what the other rows hold, the seed."""

    batch_size: int
    position: int
    fill: str
    seed: int


def bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's raw bits as integers (NaN payloads and zero signs included)."""
    width = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float64: torch.int64}
    return t.contiguous().view(width[t.dtype]) if t.dtype in width else t


def bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same shape, dtype and every bit."""
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(bits(a).cpu(), bits(b).cpu())


def fill_rows(kind: str, shape: Sequence[int], dtype: torch.dtype, gen: torch.Generator,
              device: str = "cpu") -> torch.Tensor:
    """Filler values: random normal, zeros, alternating +-HUGE, or NaN."""
    if kind == "random":
        return torch.randn(*shape, generator=gen, dtype=torch.float32).to(dtype).to(device)
    if kind == "zero":
        return torch.zeros(*shape, dtype=dtype, device=device)
    if kind == "huge":
        signs = torch.randint(0, 2, tuple(shape), generator=gen).float() * 2 - 1
        return (signs * HUGE).to(dtype).to(device)
    if kind == "nan":
        return torch.full(tuple(shape), float("nan"), dtype=dtype, device=device)
    raise ValueError(f"unknown fill {kind!r}")


def sweep(num_selected: int, max_batch: int = 64, fills: Sequence[str] = FILLS) -> list[Case]:
    """Every batch size from num_selected to max_batch, positions spread, fills cycled."""
    cases = []
    for size in range(num_selected, max_batch + 1):
        slack = size - num_selected
        cases.append(Case(size, (size * 7) % (slack + 1), fills[size % len(fills)], seed=size))
    return cases


def _as_tuple(x: torch.Tensor | tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    return x if isinstance(x, tuple) else (x,)


def embed(selected: torch.Tensor, others: torch.Tensor, position: int) -> torch.Tensor:
    """``others`` with ``selected`` inserted before row ``position``."""
    return torch.cat([others[:position], selected, others[position:]])


def row_invariance_failures(
    fn: Callable[..., torch.Tensor | tuple[torch.Tensor, ...]],
    selected: tuple[torch.Tensor, ...],
    make_others: Callable[[str, int, torch.Generator], tuple[torch.Tensor, ...]],
    cases: Sequence[Case],
) -> list[str]:
    """Cases where ``fn``'s output rows for ``selected`` differ in any bit from ``fn(*selected)``.

    ``selected`` holds one tensor per row-indexed input (same first dim S); ``make_others``
    builds ``n`` filler rows of each input for a fill kind. Every output of ``fn`` is row-indexed.
    """
    num_selected = selected[0].shape[0]
    reference = _as_tuple(fn(*selected))
    failures = []
    for case in cases:
        if not 0 <= case.position <= case.batch_size - num_selected:
            raise ValueError(f"{case} cannot hold {num_selected} selected rows at position {case.position}")
        gen = torch.Generator().manual_seed(case.seed)
        others = make_others(case.fill, case.batch_size - num_selected, gen)
        batch = tuple(embed(s, o, case.position) for s, o in zip(selected, others))
        outputs = _as_tuple(fn(*batch))
        for i, (ref, out) in enumerate(zip(reference, outputs)):
            got = out[case.position:case.position + num_selected]
            if not bits_equal(ref, got):
                diff = (ref.double().cpu() - got.double().cpu()).abs()
                failures.append(f"{case}: output {i} differs in {int((bits(ref) != bits(got)).sum())} "
                                f"elements, max |diff| {diff.nan_to_num(nan=float('inf')).max().item():.3g}")
    return failures


def cases(num_selected: int, max_batch: int = 64, max_cases: int = 6) -> st.SearchStrategy[list[Case]]:
    """Hypothesis: a few batches holding ``num_selected`` rows at any position, any fill."""
    @st.composite
    def one(draw: st.DrawFn) -> Case:
        size = draw(st.integers(num_selected, max_batch))
        return Case(size, draw(st.integers(0, size - num_selected)), draw(st.sampled_from(FILLS)),
                    draw(st.integers(0, 2**16)))
    return st.lists(one(), min_size=1, max_size=max_cases)
