"""The greedy token's split argmax at every part count bench/greedy_tokens.py times (kept apart from
tests/engine/test_sampler.py, a property test whose imports must be runtime dependencies)."""

import pytest
import torch

from bench.greedy_tokens import adversarial_rows, part_counts
from engine.sampler import split_argmax


def test_split_argmax_is_argmax_at_every_part_count_the_bench_times():
    """bench/greedy_tokens.py times these part counts; each must give argmax's index, ties and NaN included."""
    vocab_size = 128256
    counts = part_counts(vocab_size)
    assert 1 in counts and 64 in counts and 256 in counts and all(vocab_size % p == 0 for p in counts)
    for rows in adversarial_rows(4, vocab_size, counts, device="cpu"):
        expected = torch.argmax(rows, dim=-1)
        for parts in counts:
            assert torch.equal(split_argmax(rows, parts), expected), parts
    with pytest.raises(AssertionError, match="do not divide"):
        split_argmax(torch.zeros(2, 1000), 3)
