"""The sampler: a function of (row, parameters, state) only, with counter-based randomness."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.sampler import _num_parts, greedy_tokens, sample
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


def test_greedy_rows_are_split_only_into_equal_parts_of_at_least_1024():
    assert _num_parts(128256) == 64 and 128256 % 64 == 0
    assert _num_parts(4096) == 4 and _num_parts(3 * 1024) == 2 and _num_parts(1000) == 1 and _num_parts(256) == 1
