"""Attention of long launches: the plan's pair against its one-kernel form, time and bits.

    PYTHONPATH=. python3 bench/attention_fused.py --out DIR [--preset llama-1b] [--cases 1x4096,1x2048@6144]

The pair (kernels/attention.py + kernels/attention_combine.py) stores every segment's fp32 softmax
state and merges a token's segments in a second launch; the one-kernel form
(kernels/attention_prefill.py) walks the same segments one after another in the program of a
query block and merges them as they end, storing only the output. For each case (``BxQ``: B
fresh prompts of Q tokens; ``BxQ@C``: Q query tokens after C cached positions) this times the
pair, the one-kernel form at the plan's tile and at other tiles, its prototype that masks only the
tiles a causal mask can cut (bench/attention_diagonal.py), and, for fresh prompts, torch's
SDPA on the same KV gathered dense (its causal mask is aligned to the top left when queries and
keys differ in number, so cached cases would not compare); it compares every output with the
pair's, bitwise. Writes ``DIR/attention_fused.json`` and ``DIR/attention_fused.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

_BENCH = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]
sys.path.insert(0, str(_BENCH.parent))

import torch  # noqa: E402

from bench import sweep_cases as sc  # noqa: E402
from bench.attention_diagonal import diagonal_attention  # noqa: E402
from bench.kernel_timing import time_calls  # noqa: E402
from kernels.plan import preset_plan  # noqa: E402
from tests.kernels.attention_cases import one_kernel_attention  # noqa: E402

# (form, BLOCK_Q, warps, stages): the pair at the plan's tile first, then the one-kernel form, then its
# prototype that masks only the tiles a causal mask can cut (bench/attention_diagonal.py)
TILES = [("pair", 16, 4, 2), ("one kernel", 16, 4, 2), ("one kernel", 32, 8, 2), ("one kernel", 32, 4, 2),
         ("one kernel", 16, 4, 3), ("one kernel", 16, 8, 2), ("one kernel", 8, 4, 2), ("diagonal masked", 16, 4, 2),
         ("diagonal masked", 32, 8, 2), ("diagonal masked", 16, 8, 2)]


def cases(text: str) -> list[tuple[int, int, int]]:
    """``BxQ[@C],...`` -> [(requests, query tokens, KV length)]; a usage error names a bad item."""
    out = []
    for item in text.split(","):
        head, _, cached = item.partition("@")
        parts = head.split("x")
        try:
            seqs, q_len, context = int(parts[0]), int(parts[1]), int(cached or 0)
        except (ValueError, IndexError):
            seqs = q_len = context = -1
        if len(parts) != 2 or seqs < 1 or q_len < 1 or context < 0:
            raise argparse.ArgumentTypeError(f"{item!r} is not BxQ or BxQ@C (B requests of Q query tokens after C "
                                             "cached positions, e.g. 1x4096 or 1x2048@6144)")
        out.append((seqs, q_len, q_len + context))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--preset", default="llama-1b")
    parser.add_argument("--cases", type=cases, default="1x4096,2x4096,1x16384,1x2048@6144")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    plan = preset_plan(args.preset)
    entry = next(e for e in plan.entries if e.kernel == "paged_attention" and not e.static_dict().get("decode")
                 and "WINDOW" not in e.constexpr_dict())
    one = next(e for e in plan.entries if e.kernel == "attention_prefill" and "WINDOW" not in e.constexpr_dict())
    scale = entry.static_dict()["head_dim"] ** -0.5
    rows = []
    for seqs, q_len, kv_len in args.cases:
        inputs = sc.attention_inputs(entry, seqs, q_len, kv_len, device=device)
        reference = None
        row = {"case": f"{seqs} x {q_len} after {kv_len - q_len}", "us": {}, "bits": {}}
        for form, block_q, warps, stages in TILES:
            name = f"{form} (BLOCK_Q {block_q}, {warps} warps, {stages} stages)"
            if form == "pair":
                call = sc.attention_call(sc.with_config(entry, {"BLOCK_Q": block_q}, warps, stages))
            else:
                tile = sc.with_config(one, {"BLOCK_Q": block_q}, warps, stages)
                call = diagonal_attention(tile) if form == "diagonal masked" else \
                    one_kernel_attention(kernel=True, entry=tile)
            try:
                out = call(*inputs, scale)
                if reference is None:
                    reference = out
                diff = int((out.view(torch.int16) != reference.view(torch.int16)).sum()) if out.dtype == torch.bfloat16 \
                    else int((out != reference).sum())
                row["bits"][name] = "equal" if diff == 0 else f"{diff} elements differ"
                row["us"][name] = time_calls([lambda: call(*inputs, scale)], device=device, repeats=args.repeats)[0]
            except Exception as exc:  # recorded; the other tiles go on
                row["bits"][name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
            print(f"{row['case']} {name}: {row['us'].get(name)} {row['bits'][name]}", file=sys.stderr, flush=True)
        if device == "cuda" and q_len == kv_len:
            row["us"]["sdpa"] = time_calls([sc.sdpa_call(*inputs, scale)], device=device, repeats=args.repeats)[0]
        rows.append(row)
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"preset": args.preset, "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
              "entry": entry.key, "rows": rows}
    (args.out / "attention_fused.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [f"# Attention of long launches, the pair against the one-kernel form ({args.preset}, "
             f"{result['device']})", "",
             "| case | tile | µs | bits against the plan |", "|---|---|---|---|"]
    for row in rows:
        for name, us in row["us"].items():
            lines.append(f"| {row['case']} | {name} | {us:.1f} | {row['bits'].get(name, '')} |")
    (args.out / "attention_fused.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
