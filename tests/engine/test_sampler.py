"""The sampler: a function of (row, parameters, state) only, with counter-based randomness."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import sampler
from engine.sampler import _num_parts, greedy_tokens, nucleus, sample
from engine.sampling_params import SamplerState, SamplingParams, uniform

ROW = torch.linspace(-2.0, 2.0, 50, dtype=torch.float32)[torch.randperm(50, generator=torch.Generator().manual_seed(0))]


def test_greedy_takes_the_first_maximum_and_advances_the_state():
    row = torch.tensor([0.5, 2.0, 2.0, -1.0])
    token, state = sample(row, SamplingParams(), SamplerState(7, 3))
    assert token == 1 and state == SamplerState(7, 4)


def test_uniform_depends_only_on_seed_and_counter():
    draws = {uniform(SamplerState(seed, counter)) for seed in range(20) for counter in range(20)}
    assert len(draws) == 400 and all(0.0 <= u < 1.0 for u in draws)
    assert uniform(SamplerState(3, 9)) == uniform(SamplerState(3, 9))


def test_equal_row_and_state_give_equal_token_whatever_ran_before():
    params = SamplingParams(temperature=1.3, top_k=30, top_p=0.95)
    first = [sample(ROW.clone(), params, SamplerState(11, c)) for c in range(40)]
    for c in reversed(range(40)):  # another order, other rows in between
        sample(torch.randn(50), params, SamplerState(99, c))
        assert sample(ROW.clone(), params, SamplerState(11, c)) == first[c]


def test_top_k_and_top_p_restrict_the_candidates():
    top5 = set(torch.topk(ROW, 5).indices.tolist())
    tokens = {sample(ROW, SamplingParams(temperature=5.0, top_k=5), SamplerState(1, c))[0] for c in range(300)}
    assert tokens <= top5 and len(tokens) > 1
    greedy = int(ROW.argmax())
    assert {sample(ROW, SamplingParams(temperature=1.0, top_k=1), SamplerState(1, c))[0] for c in range(50)} == {greedy}
    assert {sample(ROW, SamplingParams(temperature=1.0, top_p=1e-9), SamplerState(1, c))[0]
            for c in range(50)} == {greedy}


def test_sampling_follows_the_softmax_distribution():
    row = torch.tensor([0.0, 1.0, 2.0], dtype=torch.float32)
    counts = torch.zeros(3)
    for c in range(3000):
        counts[sample(row, SamplingParams(temperature=1.0), SamplerState(5, c))[0]] += 1
    expected = torch.softmax(row.double(), 0) * 3000
    assert float((counts - expected).abs().max()) < 5 * float(expected.sqrt().max())


def _full_sort_cut(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """The top-p cut as a stable descending sort of the whole row gives it (the definition)."""
    sorted_probs, order = torch.sort(probs, descending=True, stable=True)
    mass_before = torch.cumsum(sorted_probs, dim=0) - sorted_probs
    return probs.index_fill(0, order[mass_before >= top_p], 0.0)


def _bits(t: torch.Tensor) -> list[int]:
    return t.view(torch.int64).tolist()


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_top_p_cut_is_the_whole_rows_sort_cut_bit_for_bit(data):
    """Narrow levels first (so rows go on to wider ones and to the whole row), ties, zeros
    from top-k's -inf, flat and peaked rows: the same bits as sorting the whole row."""
    vocab_size = data.draw(st.integers(1, 300))
    kind = data.draw(st.sampled_from(["ties", "normal", "peaked", "masked", "nan"]))
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31 - 1)))
    if kind == "ties":
        x = torch.randint(-3, 3, (vocab_size,), generator=g).double()
    else:
        x = torch.randn(vocab_size, generator=g, dtype=torch.float64) * (20.0 if kind == "peaked" else 1.0)
    if kind == "masked":
        x[torch.rand(vocab_size, generator=g) < 0.7] = float("-inf")
        x[0] = 0.0
    if kind == "nan":
        x[int(torch.randint(0, vocab_size, (1,), generator=g))] = float("nan")
    probs = torch.softmax(x, dim=0)
    top_p = data.draw(st.sampled_from([1e-9, 0.1, 0.5, 0.9, 0.95, 0.999, 1.0 - 1e-12]))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sampler, "NUCLEUS_LEVELS", data.draw(st.sampled_from([(0.5,), (0.9, 0.1), sampler.NUCLEUS_LEVELS])))
        cut = nucleus(probs, top_p)
    assert _bits(cut) == _bits(_full_sort_cut(probs, top_p))


def test_the_top_p_cut_of_a_peaked_large_row_sorts_only_candidates(monkeypatch):
    """A 128K row whose nucleus is small is cut from a sort of its entries near the largest alone."""
    row = torch.randn(128256, generator=torch.Generator().manual_seed(3), dtype=torch.float64) * 8
    probs = torch.softmax(row, dim=0)
    sorted_sizes = []
    real_sort = torch.sort
    monkeypatch.setattr(sampler.torch, "sort", lambda t, **kw: sorted_sizes.append(t.shape[0]) or real_sort(t, **kw))
    cut = nucleus(probs, 0.9)
    assert len(sorted_sizes) == 1 and sorted_sizes[0] < 1000
    assert 0 < int((cut > 0).sum()) <= sorted_sizes[0]
    assert _bits(cut) == _bits(_full_sort_cut(probs, 0.9))


def test_a_level_whose_sorted_mass_falls_short_of_top_p_is_not_the_cut():
    """The level's unsorted sum can reach ``top_p`` while its sorted cumsum, the one that decides,
    rounds just below it: then the cut lies beyond the level, among the tiny entries."""
    for seed in range(50):
        g = torch.Generator().manual_seed(seed)
        x = torch.cat([torch.randn(2000, generator=g, dtype=torch.float64) * 0.1,
                       torch.full((2000,), -50.0, dtype=torch.float64)])  # half the row far below the level
        probs = torch.softmax(x, dim=0)
        is_level = probs >= probs.max() * sampler.NUCLEUS_LEVELS[0]
        unsorted = float(torch.where(is_level, probs, 0.0).sum())
        if unsorted > float(torch.sort(probs[is_level], descending=True, stable=True).values.cumsum(0)[-1]):
            cut = nucleus(probs, unsorted)
            assert _bits(cut) == _bits(_full_sort_cut(probs, unsorted))
            assert bool((cut[2000:] > 0).all())  # the tiny entries stay: the mass before them is short of top_p
            return
    raise AssertionError("no seed gave an unsorted sum above the sorted one")


# Few distinct values, so rows are full of ties, NaNs and signed zeros across part boundaries.
_VALUES = st.sampled_from([0.0, -0.0, 1.0, -1.0, 3.5, float("inf"), float("-inf"), float("nan")])


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_greedy_tokens_in_parts_equal_the_argmax_of_each_row(data):
    vocab_size = data.draw(st.sampled_from([4096, 8192, 3 * 1024, 1000]))
    num_rows = data.draw(st.integers(1, 4))
    base = data.draw(_VALUES)
    rows = torch.full((num_rows, vocab_size), base)
    for _ in range(data.draw(st.integers(0, 12))):  # a few cells changed, anywhere
        rows[data.draw(st.integers(0, num_rows - 1)), data.draw(st.integers(0, vocab_size - 1))] = data.draw(_VALUES)
    state = SamplingParams().initial_state()
    assert greedy_tokens(rows).tolist() == [sample(r, SamplingParams(), state)[0] for r in rows]
    assert greedy_tokens(rows).tolist() == torch.argmax(rows, dim=-1).tolist()


def test_greedy_rows_are_split_only_into_equal_parts_of_at_least_256():
    assert _num_parts(128256) == 256 and 128256 // 256 == 501  # llama-3's vocabulary
    assert _num_parts(151936) == 128 and _num_parts(262144) == 256  # qwen3's (2^7 x 1,187), gemma3's
    assert _num_parts(1024) == 4 and _num_parts(3 * 256) == 2 and _num_parts(500) == 1 and _num_parts(256) == 1
