"""RoPE inverse frequencies (with Llama-3 or linear scaling) and the cos/sin tables the rope kernel reads.

The table is computed once, on the CPU in float64, and rounded once to float32; its values are
a function of (head_dim, theta, scaling, position) only, so every engine of one D holds the same
table.
"""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["inverse_frequencies", "cos_sin_table", "layer_tables"]


def inverse_frequencies(head_dim: int, theta: float, scaling: dict[str, Any] | None) -> list[float]:
    """``inv_freq`` (head_dim/2 floats), with Hugging Face's "llama3" or "linear" scaling when given."""
    inv_freq = [1.0 / theta ** (i / head_dim) for i in range(0, head_dim, 2)]
    if scaling is None:
        return inv_freq
    if scaling.get("rope_type") == "linear":  # transformers: every position divided by factor
        return [f / scaling["factor"] for f in inv_freq]
    factor = scaling["factor"]
    low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
    old_context = scaling["original_max_position_embeddings"]
    low_freq_wavelen, high_freq_wavelen = old_context / low, old_context / high
    out = []
    for f in inv_freq:
        wavelen = 2 * math.pi / f
        # long wavelengths are slowed by `factor`, short ones kept, the band between interpolated
        scaled = f / factor if wavelen > low_freq_wavelen else f
        if high_freq_wavelen <= wavelen <= low_freq_wavelen:
            smooth = (old_context / wavelen - low) / (high - low)
            scaled = (1 - smooth) * scaled / factor + smooth * scaled
        out.append(scaled)
    return out


def cos_sin_table(head_dim: int, theta: float, scaling: dict[str, Any] | None, num_positions: int) -> torch.Tensor:
    """``[num_positions, head_dim]`` float32: cos in the first head_dim/2 columns, sin in the last.

    Scalar libm calls, not vectorised torch ops: a vectorised body and its scalar tail may round
    differently, which would make a position's row depend on the table's length.
    """
    inv_freq = inverse_frequencies(head_dim, theta, scaling)
    rows = []
    for pos in range(num_positions):
        angles = [pos * f for f in inv_freq]
        rows.append([math.cos(a) for a in angles] + [math.sin(a) for a in angles])
    return torch.tensor(rows, dtype=torch.float64).to(torch.float32).contiguous()


def layer_tables(spec: Any, num_positions: int, device: torch.device | str) -> tuple[torch.Tensor, ...]:
    """Per layer of ``spec`` (an engine ModelSpec), its cos/sin table on ``device``; layers with one
    RoPE share one tensor (Gemma3's sliding and full layers rotate with different bases)."""
    tables: dict[tuple, torch.Tensor] = {}
    out = []
    for layer in range(spec.num_layers):
        theta, scaling = spec.layer_rope(layer)
        key = (theta, None if scaling is None else tuple(sorted(scaling.items())))
        if key not in tables:
            tables[key] = cos_sin_table(spec.head_dim, theta, scaling, num_positions).to(device)
        out.append(tables[key])
    return tuple(out)
