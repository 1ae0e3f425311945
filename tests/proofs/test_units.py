"""Building blocks: layout splits, value classes, contract validation, witnesses."""

import pytest
import z3

from proofs import kinds as K
from proofs.contract import parse_contract
from proofs.errors import ContractError
from proofs.layout import decompose
from proofs.smt import exists
from proofs.witness import guess

pid, ax0, ax1, it, sm, sk = z3.Ints("pid ax0 ax1 it sm sk")


def test_decompose_symbolic_and_constant_strides():
    assert [str(i) for i in decompose((pid * 64 + ax0) * sm + (it * 32 + ax1) * sk, (sm, sk))] == \
        ["64*pid + ax0", "32*it + ax1"]
    assert [str(i) for i in decompose(pid * 512 + ax0 * 64 + ax1, (512, 64, 1))] == ["pid", "ax0", "ax1"]
    assert decompose(pid * 3, (sm, 2)) is None  # an odd offset in a tensor of even strides


def test_value_classes_keep_signed_zeros_and_nan_apart():
    assert K.unary("exp", frozenset({K.NINF})) == {K.PZERO}
    assert K.binary("sub", frozenset({K.NINF}), frozenset({K.NINF})) == {K.NAN}  # exp(-inf - m) needs finite m
    assert K.binary("add", frozenset({K.NZERO}), frozenset({K.PZERO})) == {K.PZERO}  # (-0) + (+0) = +0
    assert K.NZERO in K.binary("mul", frozenset({K.PZERO}), frozenset({K.NEG}))  # 0 * v is -0 for v < 0
    assert K.PINF in K.binary("mul", K.FINITE, K.FINITE)
    assert K.PINF not in K.binary("mul", K.FINITE, K.FINITE, no_overflow=True)
    assert K.closure("add", frozenset({K.PZERO, K.POS})) <= {K.PZERO, K.POS, K.ONE, K.PINF}


def test_witness_inverts_tile_indexing():
    lane, s = z3.Int("lane"), z3.Int("s")
    subst = dict((str(v), t) for v, t in guess([(pid * 16 + lane, s)], [pid, lane], {"lane": 16}))
    assert z3.simplify(subst["pid"] == s / 16).eq(z3.BoolVal(True))
    assert z3.simplify(subst["lane"] == s % 16).eq(z3.BoolVal(True))


def _satisfies(equations, variables, premises, lane_sizes) -> bool:
    """Whether the guessed witness solves ``equations`` for every value of the targets allowed by ``premises``."""
    witness = guess(equations, variables, lane_sizes)
    solver = z3.Solver()
    solver.add(*premises, z3.Not(z3.And(*[z3.substitute(i, *witness) == t for i, t in equations])))
    return solver.check() == z3.unsat


def test_witness_splits_a_lane_divided_and_reduced_by_a_constant():
    # tile row r is token r // 4 of the block starting at b and head 4*pid + r % 4
    lane, b, row, head = z3.Ints("lane b row head")
    equations = [(b + lane / 4, row), (4 * pid + lane % 4, head)]
    subst = dict((str(v), t) for v, t in guess(equations, [pid, lane], {"lane": 64}))
    assert z3.simplify(subst["pid"] == head / 4).eq(z3.BoolVal(True))
    assert z3.simplify(subst["lane"] == 4 * (row - b) + head % 4).eq(z3.BoolVal(True))  # no helper unknown left
    assert _satisfies(equations, [pid, lane], [head >= 0], {"lane": 64})


def test_witness_splits_a_program_id_by_a_constant_that_is_not_a_power_of_two():
    row, head = z3.Ints("row head")
    equations = [(pid / 3, row), (pid % 3, head)]
    assert _satisfies(equations, [pid], [row >= 0, head >= 0, head < 3], {})


def test_quantifier_elimination_over_a_divided_variable_is_exact():
    # some tile row r < 64 of a block starting at b is a live token (r // 4 < e - b) and not padding (r % 4 < 3)
    lane, b, e = z3.Ints("lane b e")
    body = z3.And(lane >= 0, lane < 64, lane % 4 < 3, b + lane / 4 < e)
    reduced = exists([lane], body)
    assert not z3.is_quantifier(reduced) and "exists" not in reduced.sexpr()
    solver = z3.Solver()
    solver.add(reduced != z3.Exists([lane], body))
    assert solver.check() == z3.unsat


BASE = {"kernel": "k", "grid": {"dims": ["T"]}, "params": {"T": "batch"},
        "tensors": {"o": {"dtype": "float32", "shape": ["T"], "strides": [1], "output": ["0"]}}}


@pytest.mark.parametrize("change,message", [
    ({"kernel": None}, "missing kernel"),
    ({"grid": {"dims": []}}, "dims must list 1 to 3"),
    ({"tensors": {"o": {"dtype": "float32", "shape": ["T"], "strides": [1]}}}, "no tensor has an output"),
    ({"tensors": {"o": {"dtype": "half", "shape": ["T"], "strides": [1], "output": ["0"]}}}, "dtype 'half'"),
    ({"tensors": {"o": {"dtype": "float32", "shape": ["T"], "strides": [1], "output": ["0"],
                        "relation": "rows"}}}, "relation must be"),
    ({"tensors": {"o": {"dtype": "float32", "shape": ["T"], "strides": [1], "output": ["0"],
                        "relation": {"index": ["* 3"]}}}}, "relation.index entry"),
    ({"params": {"T": "sometimes"}}, 'use "same" or "batch"'),
    ({"typo": 1}, "unknown key(s) typo"),
])
def test_bad_contracts_say_what_is_wrong(change, message):
    data = {**BASE, **change}
    data = {k: v for k, v in data.items() if v is not None}
    with pytest.raises(ContractError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_contract(data)
