"""Launch admission: refusal outside the plan, launch records, metadata checks."""

from __future__ import annotations

import pytest
import torch

from kernels import ops
from kernels.launch import LaunchRecord, PlanViolation, active_plan, record_launches, use_plan
from tests.kernels.attention_cases import Step, make_request, run_steps
from tests.kernels.support import tiny_plan


def test_a_launch_without_an_active_plan_is_refused():
    assert active_plan() is None
    with pytest.raises(PlanViolation, match="no active plan.*use_plan"):
        ops.linear(torch.zeros(2, 64), torch.zeros(128, 64))


def test_a_launch_outside_the_plan_is_refused_with_kernel_config_and_digest(plan_fp32):
    with pytest.raises(PlanViolation) as refused:
        ops.linear(torch.zeros(2, 64), torch.zeros(100, 64))
    message = str(refused.value)
    assert "matmul" in message and "'N': 100" in message and plan_fp32.digest in message
    assert "matmul.n128_k64" in message  # the planned alternatives are listed


@pytest.mark.parametrize("call", [
    lambda: ops.rms_norm(torch.zeros(2, 64), torch.ones(64), 1e-6),  # eps differs from the plan's
    lambda: ops.linear(torch.zeros(2, 64, dtype=torch.bfloat16), torch.zeros(128, 64, dtype=torch.bfloat16)),
    lambda: ops.linear(torch.zeros(2, 64), torch.zeros(128, 64), torch.zeros(128)),  # no planned bias
    lambda: ops.paged_attention(torch.zeros(1, 4, 16), torch.zeros(2, 16, 2, 16), torch.zeros(2, 16, 2, 16),
                                torch.zeros(1, 1, dtype=torch.int32), torch.tensor([0, 1], dtype=torch.int32),
                                torch.tensor([1], dtype=torch.int32), 0.3),  # scale differs
    lambda: ops.silu_mul(torch.zeros(2, 64)),  # intermediate size 32 is not planned
    lambda: ops.embedding(torch.zeros(2, dtype=torch.int64), torch.zeros(256, 64, dtype=torch.bfloat16)),
], ids=["eps", "dtype", "bias", "scale", "width", "static-dtype"])
def test_every_unplanned_variation_is_refused(plan_fp32, call):
    with pytest.raises(PlanViolation, match="not in the active plan"):
        call()


def test_records_are_kernel_key_config_tuples_for_every_open_recorder(plan_fp32):
    with record_launches() as outer:
        ops.linear(torch.zeros(3, 64), torch.zeros(128, 64))
        with record_launches() as inner:
            ops.rms_norm(torch.zeros(3, 64), torch.ones(64), plan_fp32.shape.rms_norm_eps)
    ops.silu_mul(torch.zeros(3, 256))
    assert [r.key for r in outer] == ["matmul.n128_k64_m16", "rms_norm.h64"]  # 3 rows: the decode bucket
    assert [r.key for r in inner] == ["rms_norm.h64"]
    kernel, key, config = outer[0]
    assert isinstance(outer[0], LaunchRecord) and kernel == "matmul" and key == "matmul.n128_k64_m16"
    assert config == {**plan_fp32.entry(key).constexpr_dict(), "num_warps": 4, "num_stages": 2}


def _layer_launches(num_tokens: int, kv_length: int) -> frozenset[tuple]:
    """The configurations one decoder layer launches for a batch of ``num_tokens`` rows."""
    plan = tiny_plan("float32")
    s = plan.shape
    gen = torch.Generator().manual_seed(num_tokens)
    with use_plan(plan), record_launches() as records:
        x, res = ops.rms_norm(torch.randn(num_tokens, 64, generator=gen), torch.ones(64), s.rms_norm_eps)
        qkv = ops.linear(x, torch.randn(128, 64, generator=gen))
        cache = torch.zeros(num_tokens // 16 + 1, 16, 2, 16)
        q = ops.rope_store_kv(qkv[:, :64].view(-1, 4, 16), qkv[:, 64:96].view(-1, 2, 16), qkv[:, 96:].view(-1, 2, 16),
                              torch.arange(num_tokens), torch.randn(256, 16), cache, cache.clone(),
                              torch.arange(num_tokens))
        request = make_request(kv_length, 4, 2, 16, torch.float32, gen)
        run_steps([Step(request, kv_length - num_tokens, kv_length)], page_size=16, scale=0.25, gen=gen)
        ops.rms_norm(ops.linear(q.flatten(1), torch.randn(64, 64, generator=gen)), torch.ones(64), s.rms_norm_eps,
                     res)
        ops.gate_up_silu_mul(x, torch.randn(256, 64, generator=gen))
    return frozenset((r.kernel, r.key, tuple(sorted(r.config.items()))) for r in records)


def test_configurations_change_with_token_count_only_at_the_buckets():
    # KV past one segment (SEG = 128 keys in float32 plans; here the block table's width bounds it)
    one_query = {_layer_launches(t, kv) for t, kv in [(1, 130), (1, 200)]}  # one token per request: a decode step
    decode = {_layer_launches(t, kv) for t, kv in [(7, 140), (16, 150)]}
    middle = {_layer_launches(t, kv) for t, kv in [(17, 170), (33, 180), (63, 130)]}
    prefill = {_layer_launches(t, kv) for t, kv in [(64, 64), (100, 170)]}  # PREFILL_ROWS["float32"] = 64
    # the row count matters only at DECODE_ROWS and PREFILL_ROWS, and for attention at one query
    # per request (the attention decode bucket: its walk and its merge) and at
    # PREFILL_ATTENTION_TOKENS["float32"] = 64 with the KV (here the block table's width) at most twice
    # the rows (the one-kernel form)
    assert len(one_query) == len(decode) == len(middle) == len(prefill) == 1
    beside_long_kv = _layer_launches(100, 230)  # a table of 256 keys, more than twice the rows: the pair
    (large_one,) = prefill
    changed = sorted(large_one ^ beside_long_kv)
    assert [kernel for kernel, _, _ in changed] == ["attention_combine", "attention_prefill", "paged_attention"]
    assert changed[1][1] == "attention_prefill.hq4_hkv2_d16_p16"
    (single,), (small,), (mid,), (large,) = one_query, decode, middle, {beside_long_kv}
    changed = sorted(single ^ small)
    assert [kernel for kernel, _, _ in changed] == ["attention_combine"] * 2 + ["paged_attention"] * 2
    (_, merge_a, merge_cfg_a), (_, merge_b, merge_cfg_b), (_, key_a, cfg_a), (_, key_b, cfg_b) = changed
    assert {key_a, key_b} == {"paged_attention.hq4_hkv2_d16_p16", "paged_attention.hq4_hkv2_d16_p16_q8"}
    assert {n for n, v in set(cfg_a) ^ set(cfg_b)} == {"BLOCK_Q"}  # same KV tiles, segments and order
    assert {merge_a, merge_b} == {"attention_combine.hq4_d16_s128", "attention_combine.hq4_d16_s128_h4"}
    assert {n for n, v in set(merge_cfg_a) ^ set(merge_cfg_b)} == {"BLOCK_H"}  # heads a program alone
    # KV of one segment: attention in one kernel, with the decode bucket's tile at one query per request
    (short_single,) = {_layer_launches(t, kv) for t, kv in [(1, 1), (1, 63)]}
    (short_small,) = {_layer_launches(t, kv) for t, kv in [(7, 40), (16, 16)]}
    for short, long, key in ((short_single, single, "attention_prefill.hq4_hkv2_d16_p16_q8"),
                             (short_small, small, "attention_prefill.hq4_hkv2_d16_p16")):
        changed = sorted(short ^ long)
        assert [(record[0], record in short) for record in changed] == [
            ("attention_combine", False), ("attention_prefill", True), ("paged_attention", False)]
        assert changed[1][1] == key
        assert len(short) == len(long) - 1
    # 9 per layer: o_proj runs the split-K pair, gate/up one launch with SiLU in its epilogue
    assert len(small) == len(mid) == len(large) == 9

    def fixed(launches):  # what no bucket may change: the weight's shape and BLOCK_K, so the K order
        return {(kernel, *(v for n, v in cfg if n in ("N", "I", "K", "BLOCK_K"))) for kernel, _, cfg in launches}
    for a, b in ((small, mid), (mid, large)):
        changed = sorted(a ^ b)
        assert changed and {kernel for kernel, _, _ in changed} == {"matmul", "matmul_silu"}
        assert fixed(a - b) == fixed(b - a)  # the buckets' tiles differ; the split path does not either


def test_metadata_checks_reject_bad_index_tensors(plan_fp32):
    with pytest.raises(ValueError, match="token_ids"):
        ops.embedding(torch.tensor([0, 256]), torch.zeros(256, 64))
    with pytest.raises(ValueError, match="a slot appears twice"):
        ops.rope_store_kv(torch.zeros(2, 4, 16), torch.zeros(2, 2, 16), torch.zeros(2, 2, 16), torch.tensor([0, 1]),
                          torch.zeros(8, 16), torch.zeros(2, 16, 2, 16), torch.zeros(2, 16, 2, 16), torch.tensor([3, 3]))
    with pytest.raises(ValueError, match="rope positions"):
        ops.rope_store_kv(torch.zeros(1, 4, 16), torch.zeros(1, 2, 16), torch.zeros(1, 2, 16), torch.tensor([9]),
                          torch.zeros(8, 16), torch.zeros(2, 16, 2, 16), torch.zeros(2, 16, 2, 16), torch.tensor([0]))
    cache = torch.zeros(2, 16, 2, 16)
    with pytest.raises(ValueError, match="query_start_loc"):
        ops.paged_attention(torch.zeros(2, 4, 16), cache, cache, torch.zeros(1, 1, dtype=torch.int32),
                            torch.tensor([0, 1], dtype=torch.int32), torch.tensor([1], dtype=torch.int32), 0.25)
    with pytest.raises(ValueError, match="pages must be in"):
        ops.paged_attention(torch.zeros(1, 4, 16), cache, cache, torch.tensor([[5]], dtype=torch.int32),
                            torch.tensor([0, 1], dtype=torch.int32), torch.tensor([1], dtype=torch.int32), 0.25)
    two_requests = dict(block_table=torch.zeros(2, 1, dtype=torch.int32),
                        query_start_loc=torch.tensor([0, 1, 3], dtype=torch.int32),
                        seq_lens=torch.tensor([1, 2], dtype=torch.int32), scale=0.25)
    with pytest.raises(ValueError, match=r"attention seq_idx.*first wrong token 2"):
        ops.paged_attention(torch.zeros(3, 4, 16), cache, cache, **two_requests,
                            seq_idx=torch.tensor([0, 1, 0], dtype=torch.int32))
    with pytest.raises(ValueError, match=r"attention seq_idx.*shape or dtype"):
        ops.paged_attention(torch.zeros(3, 4, 16), cache, cache, **two_requests,
                            seq_idx=torch.tensor([0, 1, 1], dtype=torch.int64))


def test_precomputed_seq_idx_gives_the_same_attention():
    """The forward computes seq_idx once per step; every layer's result equals computing it per call."""
    torch.manual_seed(0)
    q, cache_k, cache_v = torch.randn(3, 4, 16), torch.randn(2, 16, 2, 16), torch.randn(2, 16, 2, 16)
    meta = dict(block_table=torch.tensor([[0], [1]], dtype=torch.int32),
                query_start_loc=torch.tensor([0, 1, 3], dtype=torch.int32),
                seq_lens=torch.tensor([5, 2], dtype=torch.int32), scale=0.25)
    with use_plan(tiny_plan("float32"), check_metadata=True):
        seq_idx = ops.token_requests(meta["query_start_loc"], 3)
        assert seq_idx.tolist() == [0, 1, 1] and seq_idx.dtype == torch.int32
        assert torch.equal(ops.paged_attention(q, cache_k, cache_v, **meta, seq_idx=seq_idx),
                           ops.paged_attention(q, cache_k, cache_v, **meta))


def test_metadata_checks_can_be_turned_off():
    with use_plan(tiny_plan("float32"), check_metadata=False):
        out = ops.rope_store_kv(torch.ones(2, 4, 16), torch.ones(2, 2, 16), torch.ones(2, 2, 16), torch.tensor([0, 1]),
                                torch.zeros(8, 16), torch.zeros(2, 16, 2, 16), torch.zeros(2, 16, 2, 16),
                                torch.tensor([3, 3]))
    assert out.shape == (2, 4, 16)  # the repeated slot was not refused


@pytest.mark.parametrize("tokens,kv_len", [(3, 5), (1, 700)], ids=["one-kernel", "pair"])
def test_attention_launches_early_only_on_a_seq_idx_it_did_not_compute(monkeypatch, tokens, kv_len):
    """The kernels read seq_idx before their PDL wait: computed here, by the launch just before
    theirs, it must not be read early, so that launch goes without launch_pdl."""
    calls = []
    monkeypatch.setattr(ops, "_on_cuda", lambda *tensors: True)
    monkeypatch.setattr(ops, "launch_attention_prefill", lambda *a, early: calls.append(("one kernel", early)))
    monkeypatch.setattr(ops, "launch_attention_partial", lambda *a, early: calls.append(("pair", early)))
    monkeypatch.setattr(ops, "launch_attention_combine", lambda *a: calls.append(("combine", None)))
    pages = -(-kv_len // 16)
    q, cache = torch.zeros(tokens, 4, 16), torch.zeros(pages, 16, 2, 16)
    meta = dict(block_table=torch.arange(pages, dtype=torch.int32)[None], scale=0.25,
                seq_lens=torch.tensor([kv_len], dtype=torch.int32),
                query_start_loc=torch.tensor([0, tokens], dtype=torch.int32))
    with use_plan(tiny_plan("float32")):
        ops.paged_attention(q, cache, cache, **meta, seq_idx=torch.zeros(tokens, dtype=torch.int32))
        ops.paged_attention(q, cache, cache, **meta)
    form = "one kernel" if tokens > 1 else "pair"
    assert [c for c in calls if c[0] != "combine"] == [(form, True), (form, False)]
