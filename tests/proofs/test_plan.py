"""Every kernel of the sealed plans is verified against its contract in kernels/contracts/."""

import pytest

from kernels.plan import preset_plan
from proofs.planrun import targets_from_plan, verify_target


@pytest.mark.parametrize("target", targets_from_plan(preset_plan("tiny")), ids=lambda t: t.key)
def test_tiny_plan_entry_is_verified(target, tiny_plan_results):
    result = tiny_plan_results[target.key]
    assert result.verdict == "VERIFIED", result.reason
    assert result.source_digest == target.source_digest


@pytest.mark.parametrize("key", ["paged_attention.hq32_hkv8_d64_p16", "paged_attention.hq32_hkv8_d64_p16_q4",
                                 "attention_combine.hq32_d64_s1024", "attention_combine.hq32_d64_s1024_h8",
                                 "matmul.n128256_k2048_out_float32", "rope_store_kv.hq32_hkv8_d64_p16",
                                 "matmul.n3072_k2048", "matmul.n2048_k8192",
                                 # K ranges side by side (decode bucket): 2 ranges for qkv, 4 for down
                                 "matmul.n3072_k2048_m16", "matmul.n2048_k8192_m16"])
def test_llama_1b_entry_is_verified(key):
    target = next(t for t in targets_from_plan(preset_plan("llama-1b")) if t.key == key)
    assert verify_target(target).verdict == "VERIFIED"


def test_a_changed_source_is_not_verified(tmp_path):
    target = targets_from_plan(preset_plan("tiny"))[0]
    stale = type(target)(**{**{f: getattr(target, f) for f in target.__slots__}, "source_digest": "sha256:" + "0" * 64})
    result = verify_target(stale)
    assert result.verdict == "UNKNOWN" and "changed since the plan was sealed" in result.reason


def test_wrapper_asserts_back_premises(tiny_plan_results):
    target = next(t for t in targets_from_plan(preset_plan("tiny")) if t.kernel == "matmul")
    result = tiny_plan_results[target.key]
    checked = {p.text: p.checked for p in result.premises}
    assert checked["stride_wn == K"].startswith("wrapper check at line")
    assert checked["M >= 1"].startswith("wrapper check")  # the early return on an empty batch
    assert checked["row < M"] == "selects the element the claim is about"
    assert checked["every tensor's element extent is below 2**31 (32-bit offsets)"].startswith("wrapper check")


def test_split_k_premises_are_asserted_by_the_wrappers(tiny_plan_results):
    # the float32 plans split (kernels/configs.py SPLIT_K); the bf16 ones keep one launch for now
    targets = {t.kernel: t for t in targets_from_plan(preset_plan("tiny")) if t.kernel.startswith("matmul_")}
    for kernel, rows in (("matmul_split", "M"), ("matmul_combine", "M"), ("matmul_combine_norm", "T")):
        result = tiny_plan_results[targets[kernel].key]
        checked = {p.text: p.checked for p in result.premises}
        width = "H" if kernel == "matmul_combine_norm" else "N"
        assert checked[f"stride_ps == {rows} * {width}"].startswith("wrapper check"), kernel
        assert checked[f"{rows} >= 1"].startswith("wrapper check"), kernel
