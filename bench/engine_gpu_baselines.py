"""Baselines of bench/engine_gpu.py on the same checkpoint: transformers' generate and a plain torch loop.

transformers: ``LlamaForCausalLM.from_pretrained(<dir>)`` in bfloat16 (its default SDPA
attention), greedy ``generate`` of ``n`` tokens on ``batch`` random prompts of ``context``
tokens (1 for context 0). A streamer timestamps each step as generate hands it the step's
tokens (generate copies them to the host, so the step has finished); decode tokens per second
are ``batch * (n - 1)`` over the time from the first generated token to the last.

torch eager: the Llama forward written with plain torch ops, one token per request per step,
SDPA over a preallocated contiguous K/V cache, greedy argmax kept on the device, no graphs.
Its cached context is filled with random K/V (a step's cost does not depend on their values).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

import torch
import torch.nn.functional as F

from bench.engine_gpu_common import Budget, guarded, log, random_prompts, summary
from engine.loader import load_weights
from engine.model_config import read_model_spec
from engine.rope import cos_sin_table

__all__ = ["torch_eager_decode", "transformers_generate"]


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


class _TorchLlama:
    """The decode step of a Llama checkpoint in plain torch ops, with a [L, B, Hkv, T, D] cache."""

    def __init__(self, model_dir: Path, *, batch: int, max_len: int, device: str) -> None:
        self.spec = spec = read_model_spec(model_dir)
        self.w, _ = load_weights(model_dir, spec, dtype=torch.bfloat16, device=torch.device(device))
        cos_sin = cos_sin_table(spec.head_dim, spec.rope_theta, spec.rope_scaling_dict, max_len).to(device)
        half = spec.head_dim // 2
        self.cos, self.sin = cos_sin[:, :half].repeat(1, 2), cos_sin[:, half:].repeat(1, 2)  # [T, D]
        shape = (spec.num_layers, batch, spec.num_kv_heads, max_len, spec.head_dim)
        self.k = torch.empty(shape, dtype=torch.bfloat16, device=device).normal_(0, 1)
        self.v = torch.empty(shape, dtype=torch.bfloat16, device=device).normal_(0, 1)

    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.spec.rms_norm_eps)).to(x.dtype) * weight

    def _rope(self, x: torch.Tensor, pos: int) -> torch.Tensor:
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return (x.float() * self.cos[pos] + rotated.float() * self.sin[pos]).to(x.dtype)

    @torch.inference_mode()
    def step(self, tokens: torch.Tensor, pos: int) -> torch.Tensor:
        """Greedy next tokens [B] for ``tokens`` [B] at position ``pos`` (K/V written at ``pos``)."""
        s, w = self.spec, self.w
        b, q_width, kv_width = tokens.shape[0], s.num_heads * s.head_dim, s.num_kv_heads * s.head_dim
        x = w.embed[tokens]  # [B, H]
        for layer, lw in enumerate(w.layers):
            qkv = F.linear(self._norm(x, lw.input_norm), lw.qkv, lw.qkv_bias)
            q = self._rope(qkv[:, :q_width].view(b, s.num_heads, 1, s.head_dim), pos)
            k = self._rope(qkv[:, q_width:q_width + kv_width].view(b, s.num_kv_heads, 1, s.head_dim), pos)
            self.k[layer, :, :, pos:pos + 1] = k
            self.v[layer, :, :, pos:pos + 1] = qkv[:, q_width + kv_width:].view(b, s.num_kv_heads, 1, s.head_dim)
            attn = F.scaled_dot_product_attention(q, self.k[layer, :, :, :pos + 1], self.v[layer, :, :, :pos + 1],
                                                  enable_gqa=True)  # [B, Hq, 1, D]
            x = x + F.linear(attn.reshape(b, q_width), lw.o_proj)
            gate, up = F.linear(self._norm(x, lw.post_norm), lw.gate_up).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, lw.down)
        logits = F.linear(self._norm(x, w.final_norm), w.lm_head).float()
        return logits.argmax(dim=-1)


def _torch_runs(model: _TorchLlama, context: int, batch: int, new_tokens: int, repeats: int,
                device: str) -> dict[str, Any]:
    rates = []
    for _ in range(repeats + 1):  # the first run warms up
        tokens = torch.randint(0, model.spec.vocab_size, (batch,), device=device)
        _sync(device)
        start = time.perf_counter()
        for i in range(new_tokens):
            tokens = model.step(tokens, context + i)
        _sync(device)
        rates.append(batch * new_tokens / (time.perf_counter() - start))
    return {"tokens_per_s": summary(rates[1:]), "batch": batch, "new_tokens": new_tokens}


def torch_eager_decode(model_dir: Path, *, contexts: Sequence[int], batch: int, new_tokens: int, repeats: int,
                       budget: Budget, device: str = "cuda") -> dict[str, Any]:
    """Decode tokens per second of the plain torch loop at each context."""
    model = _TorchLlama(model_dir, batch=batch, max_len=max(contexts) + new_tokens + 1, device=device)
    out: dict[str, Any] = {}
    for context in contexts:
        if not budget.allows(10):
            out[str(context)] = {"skipped": f"time budget ({budget.left():.0f} s left)"}
            continue
        out[str(context)] = guarded(f"torch eager, context {context}",
                                    lambda: _torch_runs(model, context, batch, new_tokens, repeats, device))
        if "tokens_per_s" in out[str(context)]:
            log(f"  torch eager, context {context}: {out[str(context)]['tokens_per_s']['median']:.0f} tok/s")
    del model
    return out


class _StepClock:
    """A generate streamer that records when the prompt and then each step's tokens are handed over."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def put(self, value: torch.Tensor) -> None:
        self.times.append(time.perf_counter())

    def end(self) -> None:
        """Nothing to flush."""


def _load_transformers(model_dir: Path, device: str) -> Any:
    from transformers import LlamaForCausalLM  # bench/engine_gpu.py sets HF_HUB_OFFLINE before any import

    try:
        model = LlamaForCausalLM.from_pretrained(str(model_dir), dtype=torch.bfloat16, local_files_only=True)
    except TypeError:  # transformers before 4.56 spells it torch_dtype
        model = LlamaForCausalLM.from_pretrained(str(model_dir), torch_dtype=torch.bfloat16, local_files_only=True)
    return model.to(device).eval()


def transformers_generate(model_dir: Path, *, contexts: Sequence[int], batch: int, new_tokens: int, repeats: int,
                          prefill_shapes: Sequence[tuple[int, int]], budget: Budget,
                          device: str = "cuda") -> dict[str, Any]:
    """transformers' greedy generate: decode tokens per second by context, and prefill throughput."""
    model = _load_transformers(model_dir, device)
    vocab = model.config.vocab_size
    attention = getattr(model.config, "_attn_implementation", None)

    def generate(ids: torch.Tensor, n: int) -> tuple[float, list[float]]:
        """Wall seconds of generating ``n`` tokens, and the streamer's step times."""
        clock = _StepClock()
        _sync(device)
        start = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                                 min_new_tokens=n, do_sample=False, pad_token_id=0, streamer=clock)
        _sync(device)
        seconds = time.perf_counter() - start
        assert out.shape[1] == ids.shape[1] + n, f"generate stopped early: {out.shape[1] - ids.shape[1]} of {n}"
        assert len(clock.times) == n + 1, f"the streamer saw {len(clock.times)} puts for {n} tokens"
        return seconds, clock.times

    def decode_runs(context: int) -> dict[str, Any]:
        ids = torch.tensor(random_prompts([max(context, 1)] * batch, seed=2000 + context, vocab_size=vocab),
                           device=device)
        rates = []
        for _ in range(repeats):
            _, times = generate(ids, new_tokens)
            rates.append(batch * (new_tokens - 1) / (times[-1] - times[1]))
        return {"tokens_per_s": summary(rates), "batch": batch, "new_tokens": new_tokens}

    def prefill_runs(b: int, length: int) -> dict[str, Any]:
        ids = torch.tensor(random_prompts([length] * b, seed=6000 + length, vocab_size=vocab), device=device)
        return {"tokens_per_s": summary([b * length / generate(ids, 1)[0] for _ in range(repeats)]),
                "batch": b, "prompt_tokens": length}

    result: dict[str, Any] = {"attention": attention, "decode": {}, "prefill": {}}
    generate(torch.tensor(random_prompts([16] * batch, seed=3, vocab_size=vocab), device=device), 4)  # warm-up
    for context in contexts:
        if not budget.allows(40):
            result["decode"][str(context)] = {"skipped": f"time budget ({budget.left():.0f} s left)"}
            continue
        entry = result["decode"][str(context)] = guarded(f"transformers, context {context}",
                                                         lambda: decode_runs(context))
        if "tokens_per_s" in entry:
            log(f"  transformers, context {context}: {entry['tokens_per_s']['median']:.1f} tok/s")
    for b, length in prefill_shapes:
        key = f"{b}x{length}"
        if not budget.allows(30):
            result["prefill"][key] = {"skipped": f"time budget ({budget.left():.0f} s left)"}
            continue
        entry = result["prefill"][key] = guarded(f"transformers prefill {key}", lambda: prefill_runs(b, length))
        if "tokens_per_s" in entry:
            log(f"  transformers prefill {key}: {entry['tokens_per_s']['median']:.0f} tok/s")
    del model
    return result
