"""The front end: constructs outside the subset are UNSUPPORTED with operation and line, never passed."""

import textwrap

import pytest

from proofs.contract import parse_contract
from proofs.driver import verify_kernel
from proofs.errors import Unsupported
from proofs.interp import build_ir
from proofs.source import load_kernel

CONTRACT = {
    "kernel": "k", "grid": {"dims": ["T"]}, "params": {"T": "batch", "n": "same"},
    "groups": {"row": "r"},
    "tensors": {
        "x_ptr": {"dtype": "float32", "shape": ["T", 64], "strides": [64, 1], "relation": {"index": ["row", "*"]}},
        "out_ptr": {"dtype": "float32", "shape": ["T", 64], "strides": [64, 1], "output": ["row", "*"]},
    },
    "premises": {"assume": ["T >= 1", "T < 2**20", "0 <= row", "row < T", "n >= 0", "n < 64"]},
}
HEADER = "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(x_ptr, out_ptr, T, n):\n"


def _kernel(tmp_path, body: str):
    path = tmp_path / "k.py"
    path.write_text(HEADER + textwrap.indent(textwrap.dedent(body), "    "), encoding="utf-8")
    return load_kernel(path, "k")


COPY = """
row = tl.program_id(0)
cols = tl.arange(0, 64)
x = tl.load(x_ptr + row * 64 + cols)
"""


@pytest.mark.parametrize("body,operation", [
    ("i = 0\nwhile i < n:\n    i += 1\n", "while statement"),
    (COPY + "if n > 0:\n    x = x * 2.0\ntl.store(out_ptr + row * 64 + cols, x)\n", "if on a runtime value"),
    (COPY + "if n > 0:\n    return\ntl.store(out_ptr + row * 64 + cols, x)\n", "if on a runtime value"),
    (COPY + "return\ntl.store(out_ptr + row * 64 + cols, x)\n", "early return"),
    (COPY + "y = helper(x)\n", "name"),
    (COPY + "y = tl.reshape(x, (8, 8))\n", "tl.reshape"),
    (COPY + "p = tl.make_block_ptr(x_ptr, (T, 64), (64, 1), (0, 0), (1, 64), (1, 0))\n", "tl.make_block_ptr"),
    (COPY + "y = tl.cumsum(x, 0)\n", "tl.cumsum"),
    ("row = tl.program_id(0)\nc = tl.arange(0, 48)\n", "tl.arange"),
    ("row = tl.program_id(0)\nc = tl.arange(0, 64) // (n - n)\n", "integer floordiv by zero"),
])
def test_outside_the_subset_is_unsupported_with_line(tmp_path, body, operation):
    src = _kernel(tmp_path, body)
    contract = parse_contract(CONTRACT)
    with pytest.raises(Unsupported) as info:
        build_ir(src, contract, {}, "A")
    assert info.value.operation == operation
    assert info.value.line > 6
    result = verify_kernel(src, contract, {})
    assert result.verdict == "UNSUPPORTED" and f"line {info.value.line}" in result.reason


def test_constexprs_fold_and_pointer_increments_become_closed_forms(tmp_path):
    src = _kernel(tmp_path, """
        row = tl.program_id(0)
        cols = tl.arange(0, 16)
        ptr = x_ptr + row * 64 + cols
        acc = tl.zeros([16], dtype=tl.float32)
        for i in range(0, 4):
            acc += tl.load(ptr)
            ptr += 16
        tl.store(out_ptr + row * 64 + cols, acc)
        """)
    ir, _ = build_ir(src, parse_contract(CONTRACT), {}, "A")
    loop = next(iter(ir.loops.values()))
    assert loop.step_const == 1 and not loop.opaque_ints
    load = next(a for a in ir.accesses if a.kind == "load")
    assert "it1" in str(load.offset) and "16" in str(load.offset)


def test_a_copy_kernel_is_verified(tmp_path):
    src = _kernel(tmp_path, COPY + "tl.store(out_ptr + row * 64 + cols, x)\n")
    assert verify_kernel(src, parse_contract(CONTRACT), {}).verdict == "VERIFIED"


@pytest.mark.parametrize("limit,verdict", [("n", "VERIFIED"), ("n + 1", "REFUTED")])
def test_a_bounded_index_relation_relates_only_indices_below_its_bound(tmp_path, limit, verdict):
    # x is related only in columns < n; reading columns < limit is invariant only up to n
    bounded = {**CONTRACT["tensors"]["x_ptr"], "relation": {"index": ["row", "* < n"]}}
    contract = parse_contract({**CONTRACT, "tensors": {**CONTRACT["tensors"], "x_ptr": bounded}})
    src = _kernel(tmp_path, f"""
        row = tl.program_id(0)
        cols = tl.arange(0, 64)
        x = tl.load(x_ptr + row * 64 + cols, mask=cols < {limit}, other=0.0)
        tl.store(out_ptr + row * 64 + cols, x)
        """)
    result = verify_kernel(src, contract, {})
    assert result.verdict == verdict, result.reason
    if verdict == "REFUTED":
        assert "element of x_ptr is related (index)" in result.reason


def test_a_one_lane_block_is_its_one_index(tmp_path):
    # tl.arange(0, 1) is the constant 0: its size-1 axis has no lane for a counterexample to move
    src = _kernel(tmp_path, """
        row = tl.program_id(0)
        rows = (row + tl.arange(0, 1))[:, None]
        cols = tl.arange(0, 64)[None, :]
        x = tl.load(x_ptr + rows * 64 + cols, mask=rows < T, other=0.0)
        tl.store(out_ptr + rows * 64 + cols, x, mask=rows < T)
        """)
    result = verify_kernel(src, parse_contract(CONTRACT), {})
    assert result.verdict == "VERIFIED", result.reason
