"""The float64 operations both reference forwards share (engine/reference.py, engine/gemma_reference.py).

Plain torch, no engine code: these are the yardstick's arithmetic, not the engine's.
"""

from __future__ import annotations

import torch

__all__ = ["linear", "rms_norm", "rope", "rope_inv_freq"]


def rope_inv_freq(theta: float, head_dim: int) -> torch.Tensor:
    """``[D/2]`` unscaled RoPE inverse frequencies ``theta ** (-2i / D)``."""
    return 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))


def rms_norm(x: torch.Tensor, scale: torch.Tensor, eps: float) -> torch.Tensor:
    """``x * rsqrt(mean(x^2) + eps) * scale`` over the last dimension."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * scale


def rope(x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE, as transformers' ``apply_rotary_pos_emb``."""
    # x: [T, heads, D]; positions: [T]; inv_freq: [D/2]
    angles = positions[:, None].to(torch.float64) * inv_freq[None, :]  # [T, D/2]
    cos = torch.cat([angles.cos(), angles.cos()], -1)[:, None, :]
    sin = torch.cat([angles.sin(), angles.sin()], -1)[:, None, :]
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


def linear(x: torch.Tensor, weights: dict[str, torch.Tensor], name: str) -> torch.Tensor:
    """``x @ W.T (+ b)`` with the checkpoint's ``name.weight`` and ``name.bias`` where it stores one."""
    out = x @ weights[name + ".weight"].T
    bias = weights.get(name + ".bias")
    return out if bias is None else out + bias
