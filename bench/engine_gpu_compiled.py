"""The compiled-torch baseline of bench/engine_gpu.py: a gpt-fast-style decode under torch.compile.

The Llama decode step in plain torch ops (as bench/engine_gpu_baselines.py's eager loop), with the
K/V caches as module buffers [L, B, Hkv, max_len, D] written in place at a device-side position,
attention over the whole preallocated cache with a causal mask (SDPA), greedy argmax on the
device, compiled with ``torch.compile(mode="reduce-overhead", fullgraph=True)`` (Inductor kernels
replayed as CUDA graphs). As gpt-fast sizes its caches for each generate call, each context gets
its own cache of ``context + new_tokens + 1`` positions and its own compilation (the weights are
loaded once): a step's attention reads the whole cache, so a cache sized for the largest context
would make every context pay for it. cuBLAS and SDPA kernels: not batch-invariant. The cached
context is filled with random K/V (a step's cost does not depend on their values); tokens per
second are ``batch * new_tokens`` over the wall time of the steps.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

import torch
import torch.nn.functional as F

from bench.engine_gpu_common import Budget, guarded, log, summary
from engine.loader import load_weights
from engine.model_config import read_model_spec
from engine.rope import cos_sin_table

__all__ = ["torch_compiled_decode"]

# Seconds to keep for compiling the 16-layer step (Inductor, then CUDA graph recording) and a first
# run, before the first context and before each further one.
COMPILE_RESERVE_S = 150.0
CONTEXT_RESERVE_S = 45.0


class _StaticCacheLlama(torch.nn.Module):
    """Weights, a static K/V cache and the decode step ``(tokens [B], pos [1]) -> greedy tokens [B]``."""

    def __init__(self, model_dir: Path, *, batch: int, max_len: int, device: str, weights: Any = None) -> None:
        """``weights``: another instance's ``w`` to share (else loaded from ``model_dir``)."""
        super().__init__()
        self.spec = spec = read_model_spec(model_dir)
        self.w = weights if weights is not None else \
            load_weights(model_dir, spec, dtype=torch.bfloat16, device=torch.device(device))[0]
        cos_sin = cos_sin_table(spec.head_dim, spec.rope_theta, spec.rope_scaling_dict, max_len).to(device)
        half = spec.head_dim // 2
        self.register_buffer("cos", cos_sin[:, :half].repeat(1, 2))  # [max_len, D]
        self.register_buffer("sin", cos_sin[:, half:].repeat(1, 2))
        shape = (spec.num_layers, batch, spec.num_kv_heads, max_len, spec.head_dim)
        self.register_buffer("k_cache", torch.empty(shape, dtype=torch.bfloat16, device=device).normal_(0, 1))
        self.register_buffer("v_cache", torch.empty(shape, dtype=torch.bfloat16, device=device).normal_(0, 1))
        self.register_buffer("key_positions", torch.arange(max_len, device=device))

    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.spec.rms_norm_eps)).to(x.dtype) * weight

    def _rope(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return (x.float() * cos + rotated.float() * sin).to(x.dtype)

    def forward(self, tokens: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        s, w = self.spec, self.w
        b, q_width, kv_width = tokens.shape[0], s.num_heads * s.head_dim, s.num_kv_heads * s.head_dim
        cos, sin = self.cos.index_select(0, pos), self.sin.index_select(0, pos)  # [1, D]
        visible = (self.key_positions <= pos)[None, None, None, :]  # [1, 1, 1, max_len]
        x = w.embed[tokens]  # [B, H]
        for layer, lw in enumerate(w.layers):
            qkv = F.linear(self._norm(x, lw.input_norm), lw.qkv, lw.qkv_bias)
            q = self._rope(qkv[:, :q_width].view(b, s.num_heads, 1, s.head_dim), cos, sin)
            k = self._rope(qkv[:, q_width:q_width + kv_width].view(b, s.num_kv_heads, 1, s.head_dim), cos, sin)
            self.k_cache[layer].index_copy_(2, pos, k)
            self.v_cache[layer].index_copy_(2, pos, qkv[:, q_width + kv_width:].view(b, s.num_kv_heads, 1, s.head_dim))
            attn = F.scaled_dot_product_attention(q, self.k_cache[layer], self.v_cache[layer], attn_mask=visible,
                                                  enable_gqa=True)  # [B, Hq, 1, D]
            x = x + F.linear(attn.reshape(b, q_width), lw.o_proj)
            gate, up = F.linear(self._norm(x, lw.post_norm), lw.gate_up).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, lw.down)
        logits = F.linear(self._norm(x, w.final_norm), w.lm_head).float()
        return logits.argmax(dim=-1)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _decode(step: Any, tokens: torch.Tensor, context: int, new_tokens: int, device: str) -> float:
    """Wall seconds of ``new_tokens`` greedy steps from position ``context``."""
    pos = torch.tensor([context], device=device)
    _sync(device)
    start = time.perf_counter()
    for _ in range(new_tokens):
        tokens = step(tokens, pos).clone()  # a graph replay overwrites its outputs
        pos += 1
    _sync(device)
    return time.perf_counter() - start


def torch_compiled_decode(model_dir: Path, *, contexts: Sequence[int], batch: int, new_tokens: int, repeats: int,
                          budget: Budget, device: str = "cuda", mode: str = "reduce-overhead") -> dict[str, Any]:
    """Decode tokens per second of the compiled static-cache loop at each context (each with its own
    cache and compilation), and each compilation's time."""
    if not budget.allows(COMPILE_RESERVE_S):
        return {"skipped": f"time budget ({budget.left():.0f} s left, compiling needs about {COMPILE_RESERVE_S:.0f})"}
    out: dict[str, Any] = {"mode": mode, "attention_span": "a cache of context + new tokens + 1 positions, "
                                                           "its own compilation per context"}
    weights = None
    for context in contexts:
        if weights is not None and not budget.allows(CONTEXT_RESERVE_S):
            out[str(context)] = {"skipped": f"time budget ({budget.left():.0f} s left)"}
            continue

        def runs() -> dict[str, Any]:
            nonlocal weights
            model = _StaticCacheLlama(model_dir, batch=batch, max_len=context + new_tokens + 1, device=device,
                                      weights=weights)
            weights = model.w
            step = torch.compile(model, mode=mode, fullgraph=True)
            tokens = torch.randint(0, model.spec.vocab_size, (batch,), device=device)
            start = time.perf_counter()
            try:
                with torch.inference_mode():
                    _decode(step, tokens, context, 3, device)  # compiles, then records the graphs
                    compile_s = time.perf_counter() - start
                    log(f"  torch compiled, context {context}: compiled and warmed up in {compile_s:.1f} s")
                    rates = [batch * new_tokens / _decode(step, tokens, context, new_tokens, device)
                             for _ in range(repeats + 1)][1:]  # the first run warms up
            finally:
                del step, model
                torch._dynamo.reset()  # the next context compiles afresh; this one's graphs go
            return {"tokens_per_s": summary(rates), "batch": batch, "new_tokens": new_tokens,
                    "cache_positions": context + new_tokens + 1, "compile_and_warmup_s": compile_s}
        out[str(context)] = guarded(f"torch compiled, context {context}", runs)
        if "tokens_per_s" in out[str(context)]:
            log(f"  torch compiled, context {context}: {out[str(context)]['tokens_per_s']['median']:.0f} tok/s")
    return out
