"""The run-time finiteness check on the CPU path: what it flags, what it must not, and mutants it catches."""

from __future__ import annotations

import torch

from kernels import configs, cpu_attention, cpu_ops, ops
from kernels.launch import require, use_plan
from kernels.plan import plan_for
from kernels.shapes import preset
from tests.kernels.attention_cases import one_kernel_attention
from tests.kernels.finiteness_cases import attention_flag_failures, combine_flag_failures, rope_store_kv_flag_failures

TINY = preset("tiny")


def _combine_entry(check_finite: bool = True):
    return configs.attention_combine_config(num_heads=TINY.num_heads, head_dim=TINY.head_dim, seg=128,
                                            dtype="float32", check_finite=check_finite)


def _store_entry(check_finite: bool = True):
    return configs.rope_store_kv_config(num_heads=TINY.num_heads, num_kv_heads=TINY.num_kv_heads,
                                        head_dim=TINY.head_dim, page_size=TINY.page_size, dtype="float32",
                                        check_finite=check_finite)


def _entry(config):
    from kernels.plan import PlanEntry

    return PlanEntry.from_config(config)


def test_combine_flags_exactly_the_poisoned_token_and_head():
    assert combine_flag_failures(cpu_attention.attention_combine, _entry(_combine_entry())) == []


def test_rope_store_kv_flags_exactly_the_poisoned_row():
    assert rope_store_kv_flag_failures(cpu_ops.rope_store_kv, _entry(_store_entry())) == []


def test_attention_flags_poisoned_q_kv_and_overflow_and_leaves_companions_bitwise_alone(plan_fp32):
    assert attention_flag_failures(ops.paged_attention, num_heads=TINY.num_heads, num_kv_heads=TINY.num_kv_heads,
                                   head_dim=TINY.head_dim, page_size=TINY.page_size) == []


def test_the_one_kernel_form_flags_the_same_rows_as_the_pair(plan_fp32):
    """kernels/attention_prefill.py's CPU twin on the same launch (a decode row, the victim's chunk, a
    chunk), which ops.paged_attention runs with the pair: the same flags and companions' bits."""
    assert attention_flag_failures(one_kernel_attention(kernel=False), num_heads=TINY.num_heads,
                                   num_kv_heads=TINY.num_kv_heads, head_dim=TINY.head_dim,
                                   page_size=TINY.page_size) == []


def test_a_check_reading_only_the_first_row_is_caught():
    def first_row_only(m, l, acc, qsl, seq_lens, seq_idx, out, nonfinite, entry):
        cpu_attention.attention_combine(m, l, acc, qsl, seq_lens, seq_idx, out, nonfinite, entry)
        nonfinite[1:] = 0.0

    failures = combine_flag_failures(first_row_only, _entry(_combine_entry()))
    assert failures and all(not f.startswith("row 0 ") for f in failures)


def test_a_check_reading_only_the_first_segment_is_caught():
    def first_segment_only(m, l, acc, qsl, seq_lens, seq_idx, out, nonfinite, entry):
        # the flag of a check that looks at segment 0 of each token: later segments made finite for it
        clean = [t.clone() for t in (m, l, acc)]
        for t in clean:
            t[:, :, 1:] = 1.0
        cpu_attention.attention_combine(*clean, qsl, seq_lens, seq_idx, torch.empty_like(out), nonfinite, entry)
        cpu_attention.attention_combine(m, l, acc, qsl, seq_lens, seq_idx, out, torch.empty_like(nonfinite), entry)

    failures = combine_flag_failures(first_segment_only, _entry(_combine_entry()))
    assert failures and all("segment 0 " not in f for f in failures)


def test_a_store_check_reading_only_k_is_caught():
    def k_only(q, k, v, positions, table, q_out, k_cache, v_cache, slots, nonfinite, entry):
        cpu_ops.rope_store_kv(q, k, torch.zeros_like(v), positions, table, q_out, k_cache, v_cache, slots, nonfinite,
                              entry)
        v_cache.view(-1, *v_cache.shape[2:]).index_copy_(0, slots, v)

    failures = rope_store_kv_flag_failures(k_only, _entry(_store_entry()))
    assert failures and all(f.startswith("v row") for f in failures)


def test_unchecked_entries_write_zero_flags_and_have_their_own_keys():
    entry = _entry(_store_entry(check_finite=False))
    assert entry.key.endswith("_unchecked") and entry.constexpr_dict()["CHECK"] == 0
    q = torch.zeros(1, TINY.num_heads, TINY.head_dim)
    k = torch.full((1, TINY.num_kv_heads, TINY.head_dim), float("nan"))
    flags = torch.full((1, TINY.num_kv_heads), -1.0)
    cache = torch.zeros(1, TINY.page_size, TINY.num_kv_heads, TINY.head_dim)
    cpu_ops.rope_store_kv(q, k, k, torch.tensor([0]), torch.zeros(1, TINY.head_dim), torch.empty_like(q), cache,
                          cache.clone(), torch.tensor([0]), flags, entry)
    assert (flags == 0).all()


def test_the_plan_of_a_shape_with_the_check_off_holds_only_unchecked_entries():
    from dataclasses import replace

    on, off = plan_for(TINY), plan_for(replace(TINY, check_finite=False))
    assert on.digest != off.digest
    checked = {e.key for e in on.entries if e.kernel in ("rope_store_kv", "attention_combine")}
    unchecked = {e.key for e in off.entries if e.kernel in ("rope_store_kv", "attention_combine")}
    assert checked and all(not k.endswith("_unchecked") for k in checked)
    assert unchecked == {k + "_unchecked" for k in checked}
    with use_plan(off):  # ops launch the unchecked variant under a plan sealed without the check
        require(_store_entry(check_finite=False))
        q = torch.zeros(2, TINY.num_heads, TINY.head_dim)
        k = torch.full((2, TINY.num_kv_heads, TINY.head_dim), float("inf"))
        flags = torch.full((2, TINY.num_kv_heads), -1.0)
        cache = torch.zeros(2, TINY.page_size, TINY.num_kv_heads, TINY.head_dim)
        ops.rope_store_kv(q, k, k, torch.tensor([0, 1]), torch.zeros(2, TINY.head_dim), cache, cache.clone(),
                          torch.tensor([0, 1]), flags)
    assert (flags == 0).all()
