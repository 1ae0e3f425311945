"""The verifier must be able to fail: every mutant is REFUTED, for its own reason, with a counterexample."""

import pytest

from tests.proofs.conftest import MUTANTS

ATTENTION = dict(NUM_KV_HEADS=2, GROUP=2, HEAD_DIM=16, PAGE_SIZE=16, BLOCK_M=16, BLOCK_N=16)
WINDOW = dict(HEAD_DIM=16, PAGE_SIZE=16, WINDOW=40, BLOCK_M=16, BLOCK_N=16)

# (file, kernel, constexprs, a phrase the refutation must contain)
CASES = [
    ("tile_from_m", "matmul_tile_from_m", {}, "structure differs"),
    ("split_k_from_m", "matmul_split_k", {}, "at most one writer"),
    ("split_k_grid_atomic", "matmul_split_k_atomic", {}, "atomic accumulation"),
    ("row_reduction", "tile_norm", {}, "load of x_ptr"),
    ("atomic_rowsum", "rowsum_atomic", {}, "atomic accumulation"),
    ("attention_no_causal", "attention_kernel", ATTENTION, "k_cache_ptr"),
    ("window_no_clamp", "window_attention_kernel", WINDOW, "cannot show the left operand is exactly +0"),
    ("window_start_from_block", "attention_partial_kernel", {}, "tl.where guard"),
    ("load_without_other", "rms_norm_no_other", {}, "no masked-off element is demanded"),
    ("precision_differs", "matmul_precision", {}, "dot['tf32'"),
    ("k_tiles_from_m", "matmul_k_from_m", {}, "folds live elements of a_ptr"),
    ("head_group_wrong_modulus", "gqa_attention_kernel", {}, "at most one writer"),
    ("head_group_collides", "gqa_attention_kernel", {}, "at most one writer"),
    ("head_group_rows_from_grid", "gqa_attention_kernel", {}, "at most one writer"),
    ("split_partial_sized_by_block", "attention_partial_kernel", {}, "folds live elements of q_ptr"),
    ("denominator_over_rows", "attention_partial_kernel", {}, "the right operand of tl.dot"),
    ("split_combine_past_segment", "attention_combine_kernel", {}, "element of m_ptr is related (index)"),
    ("merge_heads_other_row", "attention_combine_kernel", {}, "element of acc_ptr is related (index)"),
    ("prefill_merge_block_max", "attention_prefill_kernel", {}, "tl.where guard"),
    ("split_count_from_m", "matmul_split_kernel", {}, "folds live elements of x_ptr"),
    ("combine_order_from_m", "matmul_combine_kernel", {}, "element of partial_ptr is related (index)"),
    ("split_atomic_combine", "matmul_split_atomic_kernel", {}, "atomic accumulation"),
    ("combine_other_row", "matmul_combine_kernel", {}, "element of partial_ptr is related (index)"),
    ("combine_norm_first_row_statistic", "matmul_combine_norm_kernel", {}, "element of partial_ptr is related (index)"),
    ("silu_up_first_row", "matmul_silu_kernel", {}, "element of x_ptr is related (index)"),
    ("finite_flag_other_row", "attention_combine_kernel", {}, "element of m_ptr is related (index)"),
    ("finite_flag_shared_slot", "rope_store_kv_kernel", {}, "at most one writer of the selected flag_ptr element"),
    ("ranges_from_m", "matmul_kernel", {}, "structure differs"),
    ("ranges_sum_order_from_m", "matmul_kernel", {}, "tl.where guard"),
]


@pytest.mark.parametrize("name,kernel,constexprs,phrase", CASES, ids=[c[0] for c in CASES])
def test_mutant_is_refuted_with_a_counterexample(verify, name, kernel, constexprs, phrase):
    result = verify(MUTANTS / f"{name}.py", kernel, **constexprs)
    assert result.verdict == "REFUTED", (result.verdict, result.reason)
    assert phrase in result.reason
    cex = result.counterexample
    assert cex["A"] and cex["B"], "the counterexample names both launches"
    assert any(k.startswith("pid") for k in cex["A"]), "it names a program id"
    assert any(o.status == "refuted" for o in result.obligations)


def test_vary_counterexample_names_the_two_specializations(verify):
    result = verify(MUTANTS / "tile_from_m.py", "matmul_tile_from_m")
    assert result.counterexample["A"]["constexprs"] == {"M": 8}
    assert result.counterexample["B"]["constexprs"] == {"M": 100}


def test_two_writers_counterexample_has_two_program_ids(verify):
    result = verify(MUTANTS / "split_k_from_m.py", "matmul_split_k")
    launch = result.counterexample["B"]
    assert launch["pid2"] != launch["pid2'"], "the two writers differ in their split index"


def test_split_count_counterexample_names_the_two_split_counts(verify):
    result = verify(MUTANTS / "split_count_from_m.py", "matmul_split_kernel")
    assert {result.counterexample["A"]["constexprs"]["SPLITS"], result.counterexample["B"]["constexprs"]["SPLITS"]} \
        == {2, 4}


def test_combine_order_counterexample_puts_one_launch_on_each_side_of_the_switch(verify):
    result = verify(MUTANTS / "combine_order_from_m.py", "matmul_combine_kernel")
    sizes = sorted(result.counterexample[launch]["M"] for launch in ("A", "B"))
    assert sizes[0] <= 64 < sizes[1], sizes


# Programmatic dependent launch: a single-launch ordering fault, so the counterexample is launch A's.
PDL_CASES = [
    ("pdl_read_before_wait", "matmul_kernel", "the load of x_ptr at line 24 comes before the grid-dependency wait"),
    ("pdl_no_wait", "rms_norm_kernel", "the load of x_ptr at line 19 comes before any grid-dependency wait"),
    ("pdl_rope_v_before_wait", "rope_store_kv_kernel",
     "the load of v_ptr at line 36 comes before the grid-dependency wait"),
]


@pytest.mark.parametrize("name,kernel,phrase", PDL_CASES, ids=[c[0] for c in PDL_CASES])
def test_pdl_mutant_is_refuted_with_the_early_access(verify, name, kernel, phrase):
    result = verify(MUTANTS / f"{name}.py", kernel)
    assert result.verdict == "REFUTED", (result.verdict, result.reason)
    assert phrase in result.reason
    assert any(k.startswith("pid") for k in result.counterexample["A"]), "it names the program that reads early"
    assert [o.pass_name for o in result.obligations if o.status == "refuted"] == ["pdl"]


def test_pdl_mutants_verify_without_pdl(verify):
    """Only the launch mode makes them wrong: launched plainly, the same kernels are VERIFIED."""
    for name, kernel, _ in PDL_CASES:
        assert verify(MUTANTS / f"{name}.py", kernel, PDL=False).verdict == "VERIFIED", name
