"""Float64 references for the accuracy tests, and the documented tolerances.

Accuracy is a separate claim from invariance: these compare against plain float64 math on the
same (already rounded) inputs, within tolerances that cover the kernels' fp32 accumulation
and, in bf16, the output roundings the kernels apply (Hugging Face Llama's).
"""

from __future__ import annotations

import torch

from tests.kernels.attention_cases import Request

# (rtol, atol) relative to the reference's scale; see docs/performance.md "Kernels".
TOLERANCES = {torch.float32: (2e-5, 2e-5), torch.bfloat16: (2e-2, 2e-2)}


def assert_close(got: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, *, what: str) -> None:
    """``|got - ref| <= atol * max|ref| + rtol * |ref|`` elementwise, with the worst element reported."""
    rtol, atol = TOLERANCES[dtype]
    got64, ref64 = got.double().cpu(), ref.double().cpu()
    scale = ref64.abs().max().clamp_min(1.0)
    excess = (got64 - ref64).abs() - (atol * scale + rtol * ref64.abs())
    worst = int(excess.argmax())
    assert torch.isfinite(got64).all(), f"{what}: non-finite output"
    assert excess.max() <= 0, (f"{what}: element {worst} is {got64.flatten()[worst].item():.6g}, "
                               f"reference {ref64.flatten()[worst].item():.6g} (rtol {rtol}, atol {atol} x {scale:.3g})")


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    out = x.double() @ weight.double().T
    return out if bias is None else out + bias.double()


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float,
             residual: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    r = x.double() if residual is None else x.double() + residual.double()
    normed = r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + eps)
    return normed * weight.double(), r


def rope(x: torch.Tensor, positions: torch.Tensor, cos_sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    table = cos_sin.double()[positions]
    cos, sin = table[:, None, :half], table[:, None, half:]
    x1, x2 = x.double()[..., :half], x.double()[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
    width = gate_up.shape[-1] // 2
    gate, up = gate_up.double()[:, :width], gate_up.double()[:, width:]
    return gate * torch.sigmoid(gate) * up


def attention(request: Request, scale: float, *, window: int = 0, softcap: float = 0.0) -> torch.Tensor:
    """Causal softmax attention of every position of ``request`` over keys 0..position (GQA);
    with ``window`` W > 0 over keys position - W < j <= position; with ``softcap`` c > 0 the
    scaled scores are ``c * tanh(s / c)`` (transformers' sliding-window and softcapped layers)."""
    q, k, v = request.q.double(), request.k.double(), request.v.double()
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # [L, Hq, D]
    scores = torch.einsum("qhd,khd->hqk", q, k) * scale
    if softcap:
        scores = softcap * torch.tanh(scores / softcap)
    length = q.shape[0]
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    if window:
        causal &= ~torch.ones(length, length, dtype=torch.bool).tril(-window)
    scores = scores.masked_fill(~causal, float("-inf"))
    return torch.einsum("hqk,khd->qhd", scores.softmax(-1), v)


def rope_table(max_positions: int, head_dim: int, theta: float) -> torch.Tensor:
    """[max_positions, head_dim] float32: cos in the first half, sin in the second (HF Llama)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    angles = torch.arange(max_positions, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return torch.cat([angles.cos(), angles.sin()], dim=1).float()
