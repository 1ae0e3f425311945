"""Every sealed configuration compiles for a Hopper GPU (sm_90), on a machine without one.

``triton.compile`` runs the whole pipeline (TTIR, TTGIR, LLVM IR, PTX, cubin) from the plan
entry's constexprs and launch options, with the 16-divisibility Triton assumes for aligned
pointers and strides at run time; bf16 matmuls must lower to Hopper warpgroup MMA.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import replace

import pytest
import triton
from triton.backends.compiler import GPUTarget

from kernels.plan import PlanEntry, plan_for, preset_plan
from kernels.shapes import PRESETS, ModelShape
from kernels.tensors import constexpr_kwargs, launch_kwargs

_POINTERS = {"float32": "*fp32", "bfloat16": "*bf16"}
# Index and fp32 pointers by kernel; every other pointer holds activations of the entry's dtype.
_INDEX_POINTERS = {("embedding", "ids_ptr"): "*i64", ("rope_store_kv", "slot_ptr"): "*i64",
                   ("rope_store_kv", "pos_ptr"): "*i64", ("rope_store_kv", "cs_ptr"): "*fp32",
                   ("rope_store_kv", "flag_ptr"): "*fp32",
                   **{(kernel, name): "*i32" for kernel in ("paged_attention", "attention_combine", "attention_prefill")
                      for name in ("query_start_ptr", "seq_lens_ptr", "seq_idx_ptr")},
                   ("paged_attention", "block_table_ptr"): "*i32", ("attention_prefill", "block_table_ptr"): "*i32",
                   ("attention_prefill", "flag_ptr"): "*fp32",
                   # the segment states and split-K partials are fp32 scratch in every dtype
                   **{(kernel, name): "*fp32" for kernel in ("paged_attention", "attention_combine")
                      for name in ("m_ptr", "l_ptr", "acc_ptr")},
                   ("matmul_split", "partial_ptr"): "*fp32", ("matmul_combine", "partial_ptr"): "*fp32",
                   ("logit_softcap", "x_ptr"): "*fp32", ("logit_softcap", "out_ptr"): "*fp32"}


def compile_for_sm90(entry: PlanEntry):
    module, name = entry.function.rsplit(".", 1)
    fn = getattr(importlib.import_module(module), name)
    dtype = entry.static_dict().get("dtype", "float32")  # logit_softcap: float32 logits in every plan
    signature, aligned, defaults = {}, [], {}
    for index, param in enumerate(inspect.signature(fn.fn).parameters.values()):
        if "constexpr" in str(param.annotation):
            signature[param.name] = "constexpr"
            if param.default is not inspect.Parameter.empty:  # an option the entry leaves off (WINDOW)
                defaults[param.name] = param.default
            continue
        if param.name.endswith("_ptr"):
            kind = _INDEX_POINTERS.get((entry.kernel, param.name), _POINTERS[dtype])
            if entry.kernel in ("matmul", "matmul_combine") and param.name == "out_ptr":
                kind = _POINTERS[entry.constexpr_dict()["OUT_DTYPE"]]
            signature[param.name] = kind
        else:
            signature[param.name] = "i32"
        if param.name not in fn.do_not_specialize and param.name != "M":
            aligned.append(index)
    attrs = {(i,): [["tt.divisibility", 16]] for i in aligned}
    constexprs = {**defaults, **constexpr_kwargs(entry)}
    source = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32),
                          options={k: v for k, v in launch_kwargs(entry).items() if k not in constexprs})


def _check_pdl(entry: PlanEntry, compiled) -> None:
    """A PDL entry launches early, so it must wait on the previous grid and release the next; any
    other entry carries neither instruction."""
    is_pdl = bool(entry.constexpr_dict().get("PDL"))
    assert compiled.metadata.launch_pdl == is_pdl, entry.key
    ptx = compiled.asm["ptx"]
    assert ("griddepcontrol.wait" in ptx) == is_pdl, entry.key
    assert ("griddepcontrol.launch_dependents" in ptx) == is_pdl, entry.key


@pytest.mark.slow
@pytest.mark.parametrize("key", preset_plan("llama-1b").keys())
def test_llama_1b_entries_compile_for_sm90(key):
    entry = preset_plan("llama-1b").entry(key)
    compiled = compile_for_sm90(entry)
    assert compiled.asm["cubin"], key
    _check_pdl(entry, compiled)
    if entry.kernel in ("matmul", "matmul_split") and entry.constexpr_dict()["BLOCK_M"] >= 64:
        assert "wgmma" in compiled.asm["ptx"], f"{key} does not use Hopper warpgroup MMA"
    elif entry.kernel == "matmul":  # the decode bucket's 16-row tiles: warp-level MMA
        assert "mma.sync" in compiled.asm["ptx"] and "wgmma" not in compiled.asm["ptx"], key


# Gemma3-1B's attention: 4 query heads, 1 KV head, head_dim 256, a 512-key window, in bf16.
GEMMA3_1B_ATTENTION = ModelShape(hidden_size=1152, num_layers=26, num_heads=4, num_kv_heads=1, head_dim=256,
                                 intermediate_size=6912, vocab_size=262144, dtype="bfloat16",
                                 attention_windows=(0, 512), attn_softcap=50.0)
H200_SHARED_PER_BLOCK = 232448  # bytes of shared memory one block may use on an H200 (227 KiB)


@pytest.mark.slow
@pytest.mark.parametrize("key", [k for k in plan_for(GEMMA3_1B_ATTENTION).keys() if "attention" in k])
def test_head_dim_256_attention_compiles_within_an_h200s_shared_memory(key):
    entry = plan_for(GEMMA3_1B_ATTENTION).entry(key)
    compiled = compile_for_sm90(entry)
    assert compiled.asm["cubin"], key
    _check_pdl(entry, compiled)
    assert compiled.metadata.shared <= H200_SHARED_PER_BLOCK, (key, compiled.metadata.shared)


@pytest.mark.slow
def test_head_dim_256_needs_the_narrower_kv_tile():
    # why attention_keys halves the tile: 128 keys of 256 x bf16, K and V in two stages, do not fit
    entry = plan_for(GEMMA3_1B_ATTENTION).entry("paged_attention.hq4_hkv1_d256_p16_w512_cap50")
    wide = replace(entry, constexprs=tuple(sorted({**entry.constexpr_dict(), "BLOCK_N": 128, "SEG": 1024}.items())))
    assert compile_for_sm90(wide).metadata.shared > H200_SHARED_PER_BLOCK


GEMMA3_1B = plan_for(replace(PRESETS["gemma3-1b"], final_logit_softcap=30.0))  # with a softcap, as Gemma2's


@pytest.mark.slow
@pytest.mark.parametrize("key", [k for k in GEMMA3_1B.keys() if k not in preset_plan("llama-1b").keys()])
def test_gemma3_1b_entries_compile_for_sm90(key):
    compiled = compile_for_sm90(GEMMA3_1B.entry(key))
    assert compiled.asm["cubin"], key
    _check_pdl(GEMMA3_1B.entry(key), compiled)
