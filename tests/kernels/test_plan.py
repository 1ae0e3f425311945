"""The sealed plan: contents, provenance, digests, and configurations that ignore batch size."""

from __future__ import annotations

import importlib
import inspect
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
import triton

from evidence_db.canonical import canonical_json, file_digest
from kernels import configs, matmul_configs
from kernels.plan import CPU_SOURCES, REPO_ROOT, plan_for, preset_plan
from kernels.shapes import PRESETS, preset
from kernels.tensors import constexpr_kwargs, launch_kwargs


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_plan_is_sorted_unique_and_dot_safe(name):
    plan = preset_plan(name)
    keys = plan.keys()
    assert list(keys) == sorted(set(keys))
    used = {e.kernel for e in plan.entries}
    # a plan whose weights are all wide enough for one launch needs no split or fold kernel; Gemma3's
    # kernels (GeGLU, the final-logit softcap) only in plans of shapes that use them
    gemma_only = {"gelu_tanh_mul", "logit_softcap"}
    assert used == set(configs.KERNELS) - gemma_only if name == "tiny" else used <= set(configs.KERNELS)
    for entry in plan.entries:
        assert re.fullmatch(r"[a-z0-9_.]+", entry.key) and ":" not in entry.key
        assert plan.lookup(entry.kernel, entry.constexprs) is entry
        assert plan.lookup(entry.kernel, dict(entry.constexprs)) is entry
    json.loads(canonical_json(plan.as_dict()))  # JSON-ready, no NaN


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_entries_name_real_triton_functions_and_their_source_digests(name):
    for entry in preset_plan(name).entries:
        module_name, function_name = entry.function.rsplit(".", 1)
        module = importlib.import_module(module_name)
        function = getattr(module, function_name)
        assert isinstance(function, triton.runtime.jit.JITFunction), entry.function
        assert (REPO_ROOT / entry.source_file).resolve() == Path(module.__file__).resolve()
        assert entry.source_digest == file_digest(REPO_ROOT / entry.source_file)
        cpu_module, cpu_name = entry.cpu_function.rsplit(".", 1)
        assert callable(getattr(importlib.import_module(cpu_module), cpu_name))
        assert all((REPO_ROOT / path).is_file() for path in CPU_SOURCES)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_constexprs_are_exactly_the_kernels_constexpr_parameters(name):
    for entry in preset_plan(name).entries:
        module_name, function_name = entry.function.rsplit(".", 1)
        fn = getattr(importlib.import_module(module_name), function_name).fn
        params = [p for p in inspect.signature(fn).parameters.values() if "constexpr" in str(p.annotation)]
        # a constexpr with a default is an option that is off unless the entry sets it (WINDOW, SOFTCAP)
        required = {p.name for p in params if p.default is inspect.Parameter.empty}
        assert required <= set(entry.constexpr_dict()) <= {p.name for p in params}, entry.key


def test_digest_is_stable_and_tracks_every_configuration_change():
    first, second = preset_plan("tiny"), preset_plan("tiny")
    assert first.digest == second.digest and first.digest.startswith("sha256:")
    assert first == second
    tiny = preset("tiny")
    changed = [replace(tiny, rms_norm_eps=1e-6), replace(tiny, page_size=32), replace(tiny, dtype="bfloat16"),
               replace(tiny, intermediate_size=192), replace(tiny, has_qkv_bias=True)]
    digests = {plan_for(shape).digest for shape in changed}
    assert first.digest not in digests and len(digests) == len(changed)


def test_plan_names_follow_presets():
    assert preset_plan("llama-1b").name == "llama-1b"
    assert plan_for(preset("small")).name == "small"
    assert plan_for(replace(preset("tiny"), vocab_size=300)).name == "custom"
    with pytest.raises(ValueError, match="known presets"):
        preset_plan("nope")


def test_config_functions_take_no_batch_dependent_argument():
    forbidden = re.compile(r"(^m$|^t$|batch|token|num_rows|rows|seq|kv_len|length)")
    checked = 0
    for name in configs.__all__:
        if name.endswith("_config"):
            params = list(inspect.signature(getattr(configs, name)).parameters)
            assert params and not [p for p in params if forbidden.search(p)], f"{name}{params}"
            checked += 1
    # decode_ and prefill_matmul_config, decode_attention_config: more configurations of matmul and attention;
    # matmul_silu has only matmul_silu_configs (below)
    assert checked == len(configs.KERNELS) + 3 - 1
    assert set(inspect.signature(configs.matmul_splits).parameters) <= {"n", "k", "dtype"}
    assert set(inspect.signature(configs.matmul_ranges).parameters) <= {"n", "k", "dtype"}
    # linear_configs takes M only to pick the decode or prefill bucket (DESIGN.md §5), tested below
    assert set(inspect.signature(configs.linear_configs).parameters) == \
        {"n", "k", "dtype", "has_bias", "out_dtype", "num_rows"}
    assert set(inspect.signature(configs.matmul_silu_configs).parameters) == {"intermediate_size", "k", "dtype",
                                                                               "num_rows"}


@pytest.mark.parametrize("name", ["tiny", "small", "llama-1b", "qwen3-0.6b", "mistral-7b"])
def test_the_decode_bucket_keeps_every_weight_s_block_k_splits_and_k_order(name):
    plan = preset_plan(name)
    matmuls = [e for e in plan.entries if e.kernel == "matmul"]
    bucketed = [e for e in matmuls if e.static_dict().get("max_rows") is not None]
    assert bucketed, f"{name} has no decode-bucket entry"
    for entry in bucketed:
        c, s = entry.constexpr_dict(), entry.static_dict()
        other = plan.entry(entry.key.removesuffix(f"_m{configs.DECODE_ROWS}")).constexpr_dict()
        assert s["max_rows"] == configs.DECODE_ROWS == c["BLOCK_M"] and c["BLOCK_M"] <= other["BLOCK_M"]
        assert (c["N"], c["K"], c["BLOCK_K"], c["OUT_DTYPE"]) == (other["N"], other["K"], other["BLOCK_K"],
                                                                 other["OUT_DTYPE"])
        assert c.get("SPLITS", 1) == other.get("SPLITS", 1) and not other.get("LOCKSTEP")
        assert c.get("LOCKSTEP", False) == (c.get("SPLITS", 1) > 1)  # a ranged weight's decode tile: side by side
        assert configs.matmul_splits(n=c["N"], k=c["K"], dtype=s["dtype"]) == 1
        for rows in (1, configs.DECODE_ROWS):
            assert configs.linear_configs(n=c["N"], k=c["K"], dtype=s["dtype"], has_bias=c["HAS_BIAS"],
                                          out_dtype=c["OUT_DTYPE"], num_rows=rows)[0].key == entry.key
        for rows in (None, configs.DECODE_ROWS + 1, 4096):
            assert configs.linear_configs(n=c["N"], k=c["K"], dtype=s["dtype"], has_bias=c["HAS_BIAS"],
                                          out_dtype=c["OUT_DTYPE"], num_rows=rows)[0].key != entry.key


@pytest.mark.parametrize("name", ["tiny", "small", "llama-1b", "qwen3-0.6b", "mistral-7b"])
def test_the_prefill_bucket_keeps_every_weight_s_block_k_splits_and_k_order(name):
    plan = preset_plan(name)
    bucketed = [e for e in plan.entries if e.kernel == "matmul" and e.static_dict().get("min_rows") is not None]
    assert bucketed, f"{name} has no prefill-bucket entry"
    for entry in bucketed:
        c, s = entry.constexpr_dict(), entry.static_dict()
        rows = configs.PREFILL_ROWS[s["dtype"]]
        other = plan.entry(entry.key.removesuffix(f"_p{rows}")).constexpr_dict()
        assert s["min_rows"] == rows and "max_rows" not in s and c["BLOCK_M"] >= other["BLOCK_M"]
        assert (c["N"], c["K"], c["BLOCK_K"], c["OUT_DTYPE"], c["HAS_BIAS"], c.get("SPLITS", 1)) == \
            (other["N"], other["K"], other["BLOCK_K"], other["OUT_DTYPE"], other["HAS_BIAS"], other.get("SPLITS", 1))
        assert not c.get("LOCKSTEP") and not other.get("LOCKSTEP")
        assert configs.matmul_splits(n=c["N"], k=c["K"], dtype=s["dtype"]) == 1
        for num_rows in (rows, rows + 1, 8192):
            assert configs.linear_configs(n=c["N"], k=c["K"], dtype=s["dtype"], has_bias=c["HAS_BIAS"],
                                          out_dtype=c["OUT_DTYPE"], num_rows=num_rows)[0].key == entry.key
        for num_rows in (None, 1, configs.DECODE_ROWS + 1, rows - 1):
            assert configs.linear_configs(n=c["N"], k=c["K"], dtype=s["dtype"], has_bias=c["HAS_BIAS"],
                                          out_dtype=c["OUT_DTYPE"], num_rows=num_rows)[0].key != entry.key


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_the_attention_decode_bucket_keeps_the_kv_tiles_segments_and_order(name):
    """Each attention entry with a decode bucket differs from it in BLOCK_Q alone (16 tile rows),
    and ops chooses it for launches of at most one token per request."""
    import torch

    from kernels import ops
    from kernels.launch import use_plan

    plan = preset_plan(name)
    walks = {e.key: e for e in plan.entries if e.kernel == "paged_attention"}
    decode = {k: e for k, e in walks.items() if e.static_dict().get("decode")}
    assert len(decode) == len({k for k in walks if not walks[k].static_dict().get("decode")})
    for key, entry in decode.items():
        c, other = entry.constexpr_dict(), walks[re.sub(r"_q\d+$", "", key)].constexpr_dict()
        assert c["BLOCK_Q"] * c["BLOCK_G"] == 16 < other["BLOCK_Q"] * other["BLOCK_G"]
        assert {n: v for n, v in c.items() if n != "BLOCK_Q"} == {n: v for n, v in other.items() if n != "BLOCK_Q"}
        assert (entry.num_warps, entry.num_stages) == (walks[re.sub(r"_q\d+$", "", key)].num_warps,
                                                       walks[re.sub(r"_q\d+$", "", key)].num_stages)
    s = plan.shape
    dtype = getattr(torch, s.dtype)
    k_cache = torch.empty(4, s.page_size, s.num_kv_heads, s.head_dim, dtype=dtype)
    with use_plan(plan):
        for num_tokens, num_seqs in ((1, 1), (3, 4), (4, 4), (5, 4), (64, 1)):
            q = torch.empty(num_tokens, s.num_heads, s.head_dim, dtype=dtype)
            walk, _ = ops.attention_entries(q, k_cache, torch.zeros(num_seqs, 2, dtype=torch.int32),
                                            s.attention_scale)
            assert walk.static_dict().get("decode", False) == (num_tokens <= num_seqs and bool(decode)), \
                (num_tokens, num_seqs, walk.key)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_the_merge_takes_several_heads_a_program_only_outside_decode_steps(name):
    """Each merge entry has a prefill-bucket twin differing in BLOCK_H alone (a power of two up to 8
    dividing the head count) where the head count allows more than one, and ops chooses it for
    launches of more tokens than requests."""
    import torch

    from kernels import ops
    from kernels.launch import use_plan

    plan = preset_plan(name)
    s = plan.shape
    merges = {e.key: e for e in plan.entries if e.kernel == "attention_combine"}
    heads = configs.prefill_combine_heads(s.num_heads)
    assert 1 <= heads <= 8 and s.num_heads % heads == 0 and heads & (heads - 1) == 0
    assert heads == 8 or s.num_heads % (2 * heads)  # the largest such power
    singles = {k: e for k, e in merges.items() if e.constexpr_dict()["BLOCK_H"] == 1}
    assert len(merges) == len(singles) * (2 if heads > 1 else 1)
    for key, entry in merges.items():
        if entry.constexpr_dict()["BLOCK_H"] > 1:
            twin = singles[key.removesuffix(f"_h{heads}")].constexpr_dict()
            assert {**entry.constexpr_dict(), "BLOCK_H": 1} == twin
    dtype = getattr(torch, s.dtype)
    k_cache = torch.empty(4, s.page_size, s.num_kv_heads, s.head_dim, dtype=dtype)
    with use_plan(plan):
        for num_tokens, num_seqs in ((1, 1), (4, 4), (5, 4), (64, 1)):
            q = torch.empty(num_tokens, s.num_heads, s.head_dim, dtype=dtype)
            _, merge = ops.attention_entries(q, k_cache, torch.zeros(num_seqs, 2, dtype=torch.int32),
                                             s.attention_scale)
            assert merge.constexpr_dict()["BLOCK_H"] == (1 if num_tokens <= num_seqs else heads)


def test_a_merge_entry_refuses_heads_a_program_that_do_not_divide_the_heads():
    with pytest.raises(ValueError, match="must be a power of two dividing the 12 query heads"):
        configs.attention_combine_config(num_heads=12, head_dim=64, seg=1024, dtype="bfloat16", block_h=8)
    assert configs.prefill_combine_heads(12) == 4 and configs.prefill_combine_heads(7) == 1


def test_split_and_vocabulary_weights_have_no_decode_bucket():
    assert configs.decode_matmul_config(n=128256, k=2048, dtype="bfloat16", has_bias=False,
                                        out_dtype="float32") is None  # already at the copy rate
    assert configs.prefill_matmul_config(n=128256, k=2048, dtype="bfloat16", has_bias=False,
                                         out_dtype="float32") is None  # only sampled rows reach it
    split = preset_plan("tiny").entry("matmul_split.n64_k64_s4").constexpr_dict()
    assert configs.linear_configs(n=64, k=64, dtype="float32", has_bias=False, out_dtype="float32",
                                  num_rows=1)[0].kernel == "matmul_split" and split["SPLITS"] == 4


def test_bf16_plans_keep_one_launch_per_weight_until_a_split_pays():
    # kernels/configs.py SPLIT_K: 4 splits measured slower on an H200 with the current tiles
    plan = preset_plan("llama-1b")
    assert not {"matmul_split", "matmul_combine", "matmul_combine_norm"} & {e.kernel for e in plan.entries}
    assert configs.matmul_splits(n=3072, k=2048, dtype="bfloat16") == 1


def test_narrow_bf16_weights_add_fixed_k_ranges_in_every_bucket():
    """matmul_ranges: llama-1b's qkv, o and q/k/v add 2 range sums, down 4; wide weights and float32 plans none."""
    plan = preset_plan("llama-1b")
    ranges = {}
    for entry in (e for e in plan.entries if e.kernel == "matmul"):
        c, s = entry.constexpr_dict(), entry.static_dict()
        ranges.setdefault((c["N"], c["K"]), set()).add(c.get("SPLITS", 1))
        assert c.get("SPLITS", 1) == configs.matmul_ranges(n=c["N"], k=c["K"], dtype="bfloat16")
        if c.get("LOCKSTEP"):
            assert s.get("max_rows") == configs.DECODE_ROWS and entry.num_warps == 2, entry.key
    assert ranges == {(3072, 2048): {2}, (2048, 2048): {2}, (512, 2048): {2}, (2048, 8192): {4},
                      (16384, 2048): {1}, (8192, 2048): {1}, (128256, 2048): {1}}
    for name in ("tiny", "small"):
        assert not [e.key for e in preset_plan(name).entries if "SPLITS" in e.constexpr_dict() and e.kernel == "matmul"]
    # a ranged gate/up weight keeps the two-launch form: matmul_silu has no K ranges
    assert configs.matmul_ranges(n=512, k=8192, dtype="bfloat16") == 4
    assert configs.matmul_silu_configs(intermediate_size=256, k=8192, dtype="bfloat16") == ()
    # ranges must be whole BLOCK_K steps, else one range
    assert configs.matmul_ranges(n=2048, k=2048 + 128, dtype="bfloat16") == 1


@pytest.mark.parametrize("name", ["llama-1b", "mistral-7b", "qwen3-0.6b", "gemma3-1b"])
def test_only_weights_with_four_k_ranges_take_the_deep_prefill_tile(name):
    """down_proj-like weights (RANGES_DEEP ranges) prefill on DEEP_PREFILL_TILES; every other bucketed
    weight keeps PREFILL_TILES at its BLOCK_K, so two-range weights' entries are unchanged."""
    deep = []
    for entry in preset_plan(name).entries:
        c = entry.constexpr_dict()
        if entry.kernel != "matmul" or entry.static_dict().get("min_rows") is None:
            continue
        tiles = (c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"], entry.num_warps, entry.num_stages)
        if c.get("SPLITS", 1) == matmul_configs.RANGES_DEEP:
            deep.append(c["K"])
            assert tiles == matmul_configs.DEEP_PREFILL_TILES[c["BLOCK_K"]], entry.key
        else:
            assert tiles == matmul_configs.PREFILL_TILES[c["BLOCK_K"]], entry.key
    assert deep == {"llama-1b": [8192], "mistral-7b": [14336]}.get(name, [])
    assert all(k >= matmul_configs.DEEP_K for k in deep)


@pytest.mark.parametrize("name", ["llama-1b", "gemma3-1b", "qwen3-0.6b", "mistral-7b"])
def test_bf16_plans_launch_every_activation_kernel_with_pdl(name):
    # the float32 logit softcap is the one entry whose configuration carries no dtype: no PDL
    plan = plan_for(replace(preset(name), final_logit_softcap=30.0))
    without = sorted(e.key for e in plan.entries if not e.constexpr_dict().get("PDL"))
    assert without == [e.key for e in plan.entries if e.kernel == "logit_softcap"]
    entry = plan.entry(next(k for k in plan.keys() if k.startswith("rms_norm.")))
    assert launch_kwargs(entry)["launch_pdl"] is True and "launch_pdl" not in constexpr_kwargs(entry)
    # early=False: a plain launch of the same compiled kernel (its wait then returns at once)
    plain = launch_kwargs(entry, early=False)
    assert "launch_pdl" not in plain and plain["PDL"] is True


def test_float32_plans_launch_without_pdl():
    # the Triton interpreter (the CPU path) has no grid-dependency instructions
    for entry in plan_for(replace(preset("llama-1b"), dtype="float32")).entries:
        assert "PDL" not in entry.constexpr_dict() and "launch_pdl" not in launch_kwargs(entry), entry.key


def test_float32_plans_exercise_the_split_path_on_the_tiny_preset():
    plan = preset_plan("tiny")
    split = {role: e for e in plan.entries if e.kernel == "matmul_split" for role in e.roles}
    assert {"o_proj", "down_proj"} <= set(split)
    steps = {role: e.constexpr_dict()["K"] // e.constexpr_dict()["SPLITS"] // e.constexpr_dict()["BLOCK_K"]
             for role, e in split.items()}
    assert steps["o_proj"] == 1 and steps["down_proj"] == 2 and split["down_proj"].constexpr_dict()["SPLITS"] == 4


@pytest.mark.parametrize("n,k,dtype", [(64, 128, "float32"), (64, 64, "float32")])
def test_the_split_is_the_same_launch_pair_for_every_use_of_a_weight(n, k, dtype):
    first = configs.linear_configs(n=n, k=k, dtype=dtype, has_bias=False, out_dtype=dtype)
    assert [c.kernel for c in first] == ["matmul_split", "matmul_combine"]
    assert first == configs.linear_configs(n=n, k=k, dtype=dtype, has_bias=False, out_dtype=dtype)
    with pytest.raises(ValueError, match="not split"):
        configs.matmul_split_config(n=16384, k=2048, dtype="bfloat16")
    with pytest.raises(ValueError, match="at least 2 splits"):
        configs.matmul_combine_config(n=n, splits=1, dtype=dtype, has_bias=False, out_dtype=dtype)


def test_llama_1b_matmul_tiles_spread_decode_over_the_gpu():
    plan = preset_plan("llama-1b")
    for entry in plan.entries:
        if entry.kernel not in ("matmul", "matmul_split"):
            continue
        c = entry.constexpr_dict()
        if entry.static_dict().get("max_rows"):  # the decode bucket: 16 rows, >= 96 column tiles or 16 wide
            assert c["BLOCK_M"] == 16 and (-(-c["N"] // c["BLOCK_N"]) >= 96 or c["BLOCK_N"] == 16), entry.key
            continue
        if entry.static_dict().get("min_rows"):  # the prefill bucket: 128-row warpgroup tiles, 8 warps
            assert c["BLOCK_M"] == 128 and c["BLOCK_N"] >= 64 and entry.num_warps == 8, entry.key
            continue
        assert c["BLOCK_M"] == 64 and c["BLOCK_N"] >= 32 and c["BLOCK_K"] >= 64
        column_tiles = -(-c["N"] // c["BLOCK_N"])
        # about one wave of a 132-SM GPU at M <= 64, or the narrowest tile
        assert column_tiles >= configs.MIN_COLUMN_PROGRAMS or c["BLOCK_N"] == 32, entry.key
    assert plan.entry("matmul.n128256_k2048_out_float32").constexpr_dict()["BLOCK_N"] == 128


def test_bf16_matmuls_take_128_deep_k_steps_but_the_widest_tiles_64():
    def block_k(n: int, k: int, dtype: str = "bfloat16") -> int:
        return configs.matmul_config(n=n, k=k, dtype=dtype, has_bias=False, out_dtype=dtype).constexpr_dict()["BLOCK_K"]

    # llama-1b down_proj: 128 since its ranges (a 256-deep step had cost its prefill tile 17%)
    assert block_k(2048, configs.DEEP_K) == 128
    assert block_k(2048, configs.DEEP_K - 64) == 128 and block_k(3072, 2048) == 128
    assert block_k(16384, 8192) == 64  # wide tiles keep their K step
    assert block_k(2048, 8192, "float32") == 64


@pytest.mark.parametrize("num_heads,num_kv_heads,block_g", [(32, 8, 4), (24, 8, 4), (12, 2, 8), (8, 8, 1), (4, 2, 2)])
def test_attention_tile_rows_hold_the_head_group_padded_to_a_power_of_two(num_heads, num_kv_heads, block_g):
    c = configs.paged_attention_config(num_heads=num_heads, num_kv_heads=num_kv_heads, head_dim=64, page_size=16,
                                       scale=0.125, dtype="bfloat16").constexpr_dict()
    assert (c["GROUP"], c["BLOCK_G"]) == (num_heads // num_kv_heads, block_g)
    assert c["BLOCK_Q"] * c["BLOCK_G"] >= 16  # tl.dot's smallest tile


def test_the_attention_wrapper_refuses_a_head_group_that_does_not_fit_the_tile_rows():
    from bench.sweep_cases import attention_inputs, with_config
    from kernels.attention import check_paged_attention
    from kernels.metadata import token_requests

    entry = preset_plan("tiny").entry(next(e.key for e in preset_plan("tiny").entries if e.kernel == "paged_attention"))
    q, k, v, table, qsl, lens = attention_inputs(entry, 2, 3, 40, device="cpu")
    seq_idx = token_requests(qsl, q.shape[0])
    check_paged_attention(q, k, v, table, qsl, lens, seq_idx, entry)
    narrow = with_config(entry, {"BLOCK_G": 1}, entry.num_warps, entry.num_stages)  # GROUP is 2
    with pytest.raises(AssertionError, match="BLOCK_G 1 is not GROUP 2 rounded up to a power of two"):
        check_paged_attention(q, k, v, table, qsl, lens, seq_idx, narrow)


def test_launch_config_validation_is_clear():
    with pytest.raises(ValueError, match="power-of-two"):
        configs.rope_store_kv_config(num_heads=4, num_kv_heads=2, head_dim=24, page_size=16, dtype="float32")
    with pytest.raises(ValueError, match="dtype"):
        configs.matmul_config(n=8, k=8, dtype="float16", has_bias=False, out_dtype="float16")
    with pytest.raises(ValueError, match="multiple"):
        configs.paged_attention_config(num_heads=6, num_kv_heads=4, head_dim=16, page_size=16, scale=0.25,
                                       dtype="float32")


def test_float_constexprs_are_rounded_to_float32():
    a = configs.paged_attention_config(num_heads=4, num_kv_heads=2, head_dim=32, page_size=16, scale=32 ** -0.5,
                                       dtype="float32")
    b = configs.paged_attention_config(num_heads=4, num_kv_heads=2, head_dim=32, page_size=16,
                                       scale=1 / 32 ** 0.5, dtype="float32")
    assert a == b
