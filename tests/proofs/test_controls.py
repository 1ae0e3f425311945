"""Positive controls: correct kernels are VERIFIED, and say what they relied on."""

from pathlib import Path

from kernels.plan import REPO_ROOT, preset_plan
from proofs.planrun import targets_from_plan, verify_target
from tests.proofs.conftest import KERNELS
from tests.proofs.test_mutants import ATTENTION, WINDOW

# The head-group variant is verified where it is measured (bench/attention_variants.py), and the
# split-KV pair where it runs (the plan's kernels), not as copies.
HEAD_GROUP_SOURCE = REPO_ROOT / "bench" / "attention_variants.py"
HEAD_GROUP_CONTRACT = KERNELS / "attention_head_group.toml"
SPLIT_PARTIAL_SOURCE = REPO_ROOT / "kernels" / "attention.py"


def _kv_loop_line(source: Path, kernel: str) -> int:
    """The line of ``kernel``'s KV-tile loop in ``source``."""
    lines = source.read_text(encoding="utf-8").splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith(f"def {kernel}("))
    return next(n for n, line in enumerate(lines[start:], start + 1) if "for j in range(" in line)


HEAD_GROUP_LOOP_LINE = _kv_loop_line(HEAD_GROUP_SOURCE, "gqa_attention_kernel")
SPLIT_LOOP_LINE = _kv_loop_line(SPLIT_PARTIAL_SOURCE, "attention_partial_kernel")
ONE_KERNEL_SOURCE = REPO_ROOT / "kernels" / "attention_prefill.py"
ONE_KERNEL_TILE_LINE = _kv_loop_line(ONE_KERNEL_SOURCE, "attention_prefill_kernel")
ONE_KERNEL_SEGMENT_LINE = next(n for n, line in enumerate(ONE_KERNEL_SOURCE.read_text(encoding="utf-8").splitlines(), 1)
                               if "for segment in range(" in line)


def _llama_1b_entry(kernel: str):
    """The llama-1b plan's result for its entry of ``kernel``."""
    return verify_target(next(t for t in targets_from_plan(preset_plan("llama-1b")) if t.kernel == kernel))

# What the plan's paged attention relies on (its finite/no_overflow premises and dot/reduce rules).
PLAN_ATTENTION_TRUSTED = {"attention-finiteness", "contract-translation", "dot-position-independence",
                          "dot-zero-terms", "gpu-execution", "host-glue", "masked-lane-semantics",
                          "reduce-position-independence", "tensor-representation", "triton-compiler",
                          "verifier-rules", "verifier-translator", "z3-solver"}


def test_tiled_matmul_is_verified(verify):
    result = verify(KERNELS / "matmul.py", "matmul_kernel", BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
    assert result.verdict == "VERIFIED", result.reason
    assert result.demand == {"a_ptr": "index [row, *]", "b_ptr": "equal (identical in both launches)"}
    assert {t.id for t in result.trusted} >= {"dot-position-independence", "triton-compiler", "z3-solver"}
    assert all(o.status == "proved" for o in result.obligations)


def test_causal_tile_attention_needs_identity_steps_and_dead_terms(verify):
    result = verify(KERNELS / "attention.py", "attention_kernel", **ATTENTION)
    assert result.verdict == "VERIFIED", result.reason
    steps = "\n".join(result.steps)
    assert "extra suffix iterations of launch A proved exact identities" in steps
    assert "dot terms with a +0 left operand dropped" in steps
    assert "dot-zero-terms" in {t.id for t in result.trusted}
    assert "attention-finiteness" in {t.id for t in result.trusted}


def test_sliding_window_with_clamp_has_identity_prefix_steps(verify):
    result = verify(KERNELS / "sliding_window.py", "window_attention_kernel", **WINDOW)
    assert result.verdict == "VERIFIED", result.reason
    steps = "\n".join(result.steps)
    assert "iterations paired by value" in steps
    assert "extra prefix iterations" in steps and "extra suffix iterations" in steps


def test_unfused_accumulation_is_unknown_not_verified(verify):
    result = verify(KERNELS / "attention_unfused.py", "attention_kernel", **ATTENTION)
    assert result.verdict == "UNKNOWN"
    assert "not an exact identity on 'acc'" in result.reason


def test_an_unseen_kernel_log_softmax_is_verified(verify):
    result = verify(KERNELS / "log_softmax.py", "log_softmax_kernel", BLOCK_SIZE=1024)
    assert result.verdict == "VERIFIED", result.reason
    assert result.demand == {"input_ptr": "index [row, *]"}


def test_an_unseen_kernel_layer_norm_with_three_outputs_is_verified(verify):
    result = verify(KERNELS / "layer_norm.py", "_layer_norm_fwd_fused", BLOCK_SIZE=1024)
    assert result.verdict == "VERIFIED", result.reason
    assert set(result.demand) == {"X", "W", "B"}


def test_head_group_attention_splitting_tile_rows_by_div_and_mod_is_verified(verify):
    # llama-1b: GROUP = BLOCK_G = 4, BLOCK_Q = 16 (the contract's constexprs); tile row r is
    # token r // 4 and head kv_head * 4 + r % 4 of the block
    result = verify(HEAD_GROUP_SOURCE, "gqa_attention_kernel", contract=HEAD_GROUP_CONTRACT)
    assert result.verdict == "VERIFIED", result.reason
    assert result.demand == {"q_ptr": "index [row, *, *]",
                             "k_cache_ptr": "paged via block_table_ptr[req], positions < p + 1",
                             "v_cache_ptr": "paged via block_table_ptr[req], positions < p + 1"}
    assert f"loop at line {HEAD_GROUP_LOOP_LINE}: extra suffix iterations of launch A proved exact identities on acc, m_i" \
        in result.steps
    assert {t.id for t in result.trusted} == PLAN_ATTENTION_TRUSTED
    assert any("the selected out_ptr element is written (by the store" in o.what for o in result.obligations)


def test_head_group_attention_with_padding_rows_is_verified(verify):
    # GROUP = 3 heads padded to BLOCK_G = 4 tile rows: rows with r % 4 == 3 are masked off
    result = verify(HEAD_GROUP_SOURCE, "gqa_attention_kernel", contract=HEAD_GROUP_CONTRACT, GROUP=3, num_heads=24)
    assert result.verdict == "VERIFIED", result.reason


def test_flattened_grid_split_by_a_constant_that_is_not_a_power_of_two_is_verified(verify):
    result = verify(KERNELS / "head_norm_flat.py", "head_norm_kernel")
    assert result.verdict == "VERIFIED", result.reason
    assert any("the selected out_ptr element is written (by the store" in o.what for o in result.obligations)


def test_split_kv_partial_state_of_each_segment_the_token_sees_is_verified():
    # llama-1b, BLOCK_Q = 64, BLOCK_N = 128, SEG = 1024: program (block, head, seg) walks the tiles
    # of keys [seg * SEG, (seg + 1) * SEG) up to its block's last position; a shorter block's walk
    # ends earlier, so the longer launch's extra tiles must be exact identities on the stored state
    result = _llama_1b_entry("paged_attention")
    assert result.verdict == "VERIFIED", result.reason
    assert result.demand == {"q_ptr": "index [row, *, *]",
                             "k_cache_ptr": "paged via block_table_ptr[req], positions < p + 1",
                             "v_cache_ptr": "paged via block_table_ptr[req], positions < p + 1"}
    steps = "\n".join(result.steps)
    for state in ("acc, m_i", "l_acc, m_i"):  # l is a dot with a ones tile, like acc
        assert f"loop at line {SPLIT_LOOP_LINE}: extra suffix iterations of launch A proved exact identities on " \
            f"{state}" in steps
    # a bf16 plan entry: launched with PDL
    assert {t.id for t in result.trusted} == PLAN_ATTENTION_TRUSTED | {"grid-dependency-semantics"}
    for tensor in ("m_ptr", "l_ptr", "acc_ptr"):
        assert any(f"the selected {tensor} element is written (by the store" in o.what for o in result.obligations)


def test_split_kv_combine_of_the_tokens_own_segments_is_verified():
    # it reads only segments 0 .. p // SEG (the bounded relation), as many in every launch, in order
    result = _llama_1b_entry("attention_combine")
    assert result.verdict == "VERIFIED", result.reason
    assert result.demand == {"m_ptr": "index [row, *, * < p // SEG + 1]", "l_ptr": "index [row, *, * < p // SEG + 1]",
                             "acc_ptr": "index [row, *, * < p // SEG + 1, *]"}
    assert any("iterations paired by index" in step for step in result.steps)
    assert "dot-zero-terms" not in {t.id for t in result.trusted}


def test_attention_in_one_kernel_with_segments_merged_as_they_end_is_verified():
    # llama-1b: the loop over segments holds the loop over a segment's KV tiles; a longer block's
    # extra segments (each walk and its merge masked off for the row) must be exact identities on
    # the merged state and the finiteness flag, its extra tiles on the segment's state
    result = _llama_1b_entry("attention_prefill")
    assert result.verdict == "VERIFIED", result.reason
    assert result.demand == {"q_ptr": "index [row, *, *]",
                             "k_cache_ptr": "paged via block_table_ptr[req], positions < p + 1",
                             "v_cache_ptr": "paged via block_table_ptr[req], positions < p + 1"}
    steps = "\n".join(result.steps)
    for state in ("acc_all, m_all", "l_all", "bad"):
        assert f"loop at line {ONE_KERNEL_SEGMENT_LINE}: extra suffix iterations of launch A proved exact identities " \
            f"on {state}" in steps
    for state in ("acc, m_i", "l_acc, m_i"):
        assert f"loop at line {ONE_KERNEL_TILE_LINE}: extra suffix iterations of launch A proved exact identities " \
            f"on {state}" in steps
    assert {t.id for t in result.trusted} == PLAN_ATTENTION_TRUSTED | {"grid-dependency-semantics"}
    for tensor in ("out_ptr", "flag_ptr"):
        assert any(f"the selected {tensor} element is written (by the store" in o.what for o in result.obligations)


def test_merged_value_classes_give_unknown_never_a_false_refutation(verify, tmp_path):
    """A correct kernel whose scores pass through a float-valued where before the mask: the value
    analysis merges its guard regions and can no longer show the masked probabilities are +0.
    That is a loss of precision, not a counterexample, so the verdict is UNKNOWN."""
    source = (KERNELS / "sliding_window.py").read_text(encoding="utf-8")
    line = "        s = tl.dot(q, k, input_precision=\"ieee\") * sm_scale\n"
    assert line in source
    folded = tmp_path / "sliding_window.py"
    folded.write_text(source.replace(line, line + "        s = tl.where(s < 0, -s, s)\n"), encoding="utf-8")
    (tmp_path / "sliding_window.toml").write_text((KERNELS / "sliding_window.toml").read_text(encoding="utf-8"),
                                                  encoding="utf-8")
    result = verify(folded, "window_attention_kernel", **WINDOW)
    assert result.verdict == "UNKNOWN", result.reason
    assert "merged guard regions" in result.reason


def test_pdl_weight_tile_before_the_wait_is_verified_on_the_immutable_premise(verify):
    result = verify(KERNELS / "pdl_weight_first.py", "matmul_kernel")
    assert result.verdict == "VERIFIED", result.reason
    assert "w_ptr is not written while a launch of the plan runs (contract: immutable)" in \
        {p.text for p in result.premises}
    assert "grid-dependency-semantics" in {t.id for t in result.trusted}


def test_a_launch_without_pdl_does_not_rest_on_grid_dependency_semantics(verify):
    result = verify(KERNELS / "pdl_weight_first.py", "matmul_kernel", PDL=False)
    assert result.verdict == "VERIFIED", result.reason
    assert "grid-dependency-semantics" not in {t.id for t in result.trusted}
