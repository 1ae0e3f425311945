"""The CPU path's arithmetic: fixed-order tree sums and a position-independent exp."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kernels.cpu_math import exp, rsqrt, tree_sum
from tests.kernels.invariance import bits, bits_equal
from tests.kernels.support import KERNEL_SETTINGS


def test_tree_sum_adds_in_the_documented_pairwise_order():
    x = torch.tensor([[1e8, 1.0, -1e8, 1.0, 3.0]])
    # width 8: level 1 pairs (i, i+4): [1e8+3, 1, -1e8, 1]; level 2: [(1e8+3)-1e8, 2]; level 3: sum
    level1 = torch.tensor([1e8, 1.0, -1e8, 1.0]) + torch.tensor([3.0, 0.0, 0.0, 0.0])
    expected = (level1[0] + level1[2]) + (level1[1] + level1[3])
    assert bits_equal(tree_sum(x), expected.reshape(1))
    assert tree_sum(x).item() == 2.0  # 1e8 + 3 rounds to 1e8 in float32
    assert tree_sum(torch.zeros(3, 0)).shape == (3,)


@KERNEL_SETTINGS
@given(length=st.integers(1, 130), rows=st.integers(1, 40), seed=st.integers(0, 2**16))
def test_tree_sum_of_a_row_does_not_depend_on_other_rows_or_dim(length, rows, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, length, generator=gen) * 1e3
    alone = torch.stack([tree_sum(x[r:r + 1])[0] for r in range(rows)])
    assert bits_equal(tree_sum(x), alone)
    assert bits_equal(tree_sum(x.T.contiguous(), dim=0), alone)


def test_exp_is_within_two_ulp_of_float64_on_normal_results():
    x = torch.linspace(-87.0, 88.5, 400_001)
    got = exp(x).double()
    ref = torch.exp(x.double())
    ulp = (torch.nextafter(ref.float(), torch.tensor(float("inf"))).double() - ref.float().double())
    assert ((got - ref).abs() / ulp).max() <= 2.0


def test_exp_special_values():
    x = torch.tensor([float("-inf"), -200.0, float("inf"), 200.0, float("nan"), 0.0, -0.0])
    y = exp(x)
    assert bits(y[:2]).tolist() == [0, 0]  # exactly +0.0: masked attention weights rely on it
    assert y[2] == float("inf") and y[3] == float("inf") and torch.isnan(y[4])
    assert y[5] == 1.0 and y[6] == 1.0
    with pytest.raises(TypeError):
        exp(torch.zeros(2, dtype=torch.float64))


@KERNEL_SETTINGS
@given(size=st.integers(1, 300), offset=st.integers(0, 17), seed=st.integers(0, 2**16))
def test_exp_of_an_element_does_not_depend_on_its_position(size, offset, seed):
    # torch's vectorised kernels handle a tensor's tail (and each thread's chunk) with scalar
    # code; an element must give the same bits wherever it lands.
    x = torch.randn(size + offset, generator=torch.Generator().manual_seed(seed)) * 40
    whole = exp(x)[offset:]
    singles = torch.cat([exp(x[i:i + 1]) for i in range(offset, size + offset)])
    assert bits_equal(whole, singles)
    assert bits_equal(rsqrt(x.abs())[offset:], torch.cat([rsqrt(x[i:i + 1].abs()) for i in range(offset, size + offset)]))
