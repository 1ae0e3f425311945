"""--shard i/n partitions the units: together the shards are exactly the full run."""

import pytest
from hypothesis import given, settings, strategies as st

from engine.compare.protocol import EXPECTED_COMPARISONS, SUITES
from engine.compare.runner import plan_units
from engine.compare.scales import SCALES
from engine.compare.sharding import Shard, assign, parse_shard, select

UNITS = plan_units([s for s in SUITES if s != "fidelity"], SCALES["full"], 1000, 3)


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=1, max_value=40))
def test_shards_partition_the_units(n):
    seen = []
    for i in range(1, n + 1):
        seen += [u.unit_id for u in select(UNITS, Shard(i, n))]
    assert sorted(seen) == sorted(u.unit_id for u in UNITS)
    total = sum(u.num_comparisons for i in range(1, n + 1) for u in select(UNITS, Shard(i, n)))
    assert total == sum(EXPECTED_COMPARISONS[s] for s in SUITES if s != "fidelity")


def test_assignment_is_deterministic_and_balanced():
    assert assign(UNITS, 4) == assign(list(reversed(UNITS)), 4)
    loads = [sum(u.cost for u in select(UNITS, Shard(i, 4))) for i in range(1, 5)]
    assert max(loads) <= 1.5 * (sum(loads) / 4)


@pytest.mark.parametrize("text,expected", [("1/1", Shard(1, 1)), (" 3 / 5 ", Shard(3, 5))])
def test_parse_shard(text, expected):
    assert parse_shard(text) == expected


@pytest.mark.parametrize("text", ["0/3", "4/3", "1", "a/b", "", "1/0"])
def test_parse_shard_rejects(text):
    with pytest.raises(ValueError):
        parse_shard(text)
