"""Packing chunks into a step's host tensors: the vectorised packing equals the plain per-token definition."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.model_runner import Chunk, _pack

PAGE, MAX_PAGES = 4, 9


def reference(chunks, page_size, max_pages):
    """The definition, one token at a time."""
    ids, positions, slots, starts, lens, sampled, prompt = [], [], [], [0], [], [], []
    table = torch.zeros(len(chunks), max_pages, dtype=torch.int32)
    for b, c in enumerate(chunks):
        for p in range(c.start, c.end):
            ids.append(c.token_ids[p])
            positions.append(p)
            slots.append(c.page_table[p // page_size] * page_size + p % page_size)
        table[b, :len(c.page_table)] = torch.tensor(list(c.page_table), dtype=torch.int32)
        starts.append(starts[-1] + c.end - c.start)
        lens.append(c.end)
        if c.is_sampled:
            sampled.append(starts[-1] - 1)
        prompt.extend(starts[-2] + p - c.start for p in range(*c.prompt_rows))
    return {"input_ids": torch.tensor(ids, dtype=torch.int64), "positions": torch.tensor(positions, dtype=torch.int64),
            "slot_mapping": torch.tensor(slots, dtype=torch.int64), "block_table": table,
            "query_start_loc": torch.tensor(starts, dtype=torch.int32), "seq_lens": torch.tensor(lens, dtype=torch.int32),
            "sample_rows": torch.tensor(sampled + prompt, dtype=torch.int64)}


@st.composite
def chunk(draw):
    length = draw(st.integers(1, MAX_PAGES * PAGE))
    pages = draw(st.lists(st.integers(0, 500), min_size=-(-length // PAGE), max_size=MAX_PAGES, unique=True))
    start = draw(st.integers(0, length - 1))
    is_sampled = draw(st.booleans())
    a = draw(st.integers(start, length))
    b = draw(st.integers(a, length - (1 if is_sampled else 0))) if a < length else a
    tokens = draw(st.lists(st.integers(0, 2**31), min_size=length, max_size=length))
    return Chunk(tuple(tokens) if draw(st.booleans()) else tokens, pages, start, length, is_sampled,
                 (a, b) if b > a else (0, 0))


@settings(max_examples=200, deadline=None)
@given(st.lists(chunk(), min_size=0, max_size=5))
def test_packing_equals_the_per_token_definition(chunks):
    got, want = _pack(chunks, PAGE, MAX_PAGES), reference(chunks, PAGE, MAX_PAGES)
    assert got.keys() == want.keys()
    for name in want:
        assert got[name].dtype == want[name].dtype and torch.equal(got[name], want[name]), name
