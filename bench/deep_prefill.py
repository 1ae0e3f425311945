"""Prefill of narrow weights with fixed K ranges (llama-1b's down_proj, 2,048 x 8,192 in four ranges;
qkv and o in two): which form of the same arithmetic runs them fastest, against cuBLAS?

    PYTHONPATH=. python3 bench/deep_prefill.py --out DIR [--preset llama-1b] [--roles down,o,qkv]
        [--ms 4096,8192] [--tiles 128x64w8s4n,...] [--forms tiles,pad,flat,tma,one]

The plan's prefill tile runs a weight's K ranges one after another in one program (kernels/matmul.py,
``SPLITS`` without ``LOCKSTEP``), holding two fp32 tiles: the ranges' sum and the current range's.
This script times, at each M, on CUDA-graph replays (bench/kernel_timing.py):

* the plan's entry, and ``torch.mm`` (cuBLAS) on the same inputs;
* ``tiles``: the plan's kernel with other tiles, warps, stages and grid orders (same BLOCK_K, ranges
  and K order);
* ``pad``: the plan's kernel with padded row strides of x and of the weight (partition camping at
  16 KB strides);
* ``flat``: one K loop over all ranges, a range's sum folded in when its last step ends (the same
  dot steps and adds), instead of one software-pipelined loop per range;
* ``tma``: the plan's nested loops with tensor-descriptor (TMA) loads;
* ``one``: the plan's tile without ranges (other bits: the cost of the ranges, for reference only).

Every form is compared with the plan's entry bitwise on adversarial values (exponents over
2^-12 .. 2^12); all but ``one`` are expected equal. Writes ``DIR/deep_prefill.json`` and
``DIR/deep_prefill.md``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

_BENCH = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]
sys.path.insert(0, str(_BENCH.parent))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

from bench.decode_tiles import adversarial, torch_dtype, weights  # noqa: E402
from bench.kernel_timing import time_calls  # noqa: E402
from kernels import configs  # noqa: E402
from kernels.matmul import launch_matmul, matmul_kernel  # noqa: E402
from kernels.plan import PlanEntry  # noqa: E402
from kernels.shapes import preset  # noqa: E402
from kernels.tensors import launch_kwargs  # noqa: E402

REPEATS = 7
# (BLOCK_M, BLOCK_N, warps, stages, N_MAJOR) besides the plan's prefill tile; --tiles replaces them
TILES = "128x128w8s3n,128x128w16s3n,128x64w8s3n,128x64w8s5n,128x64w8s6n,128x64w8s4m,64x128w8s4n,256x64w8s2n," \
        "256x64w16s2n,128x32w8s6n,64x64w4s6n"
FORMS = "tiles,pad,flat,tma,one"
PADS = [(64, 0), (0, 64), (64, 64), (256, 256)]  # extra elements per row of x, of the weight


@triton.jit
def _tile_ids(N_MAJOR: tl.constexpr):
    """(row tile, column tile) of this program; N_MAJOR puts column tiles on grid axis 0, as the plan's kernel."""
    if N_MAJOR:
        pid_m = tl.program_id(1)
        pid_n = tl.program_id(0)
    else:
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
    return pid_m, pid_n


@triton.jit
def _store_tile(out_ptr, acc, pid_m, pid_n, M, N: tl.constexpr, stride_om, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr):
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :], acc.to(out_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit(do_not_specialize=["M"])
def flat_kernel(x_ptr, w_ptr, out_ptr, M, stride_xm, stride_wn, stride_om,
                N: tl.constexpr, K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr, SPLITS: tl.constexpr, N_MAJOR: tl.constexpr):
    # x: [M, K]; w: [N, K]; out: [M, N]. One loop over K; range s's sum added when its last step ends.
    pid_m, pid_n = _tile_ids(N_MAJOR)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :]
    w_ptrs = w_ptr + offs_n[None, :] * stride_wn + offs_k[:, None]
    x_mask = offs_m[:, None] < M
    w_mask = offs_n[None, :] < N
    STEPS: tl.constexpr = K // SPLITS // BLOCK_K
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    part = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for i in range(0, K // BLOCK_K):
        part = tl.dot(tl.load(x_ptrs + i * BLOCK_K, mask=x_mask, other=0.0),
                      tl.load(w_ptrs + i * BLOCK_K, mask=w_mask, other=0.0), part, input_precision="ieee")
        if (i + 1) % STEPS == 0:
            if i + 1 == STEPS:
                acc = part
            else:
                acc = acc + part
            part = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    _store_tile(out_ptr, acc, pid_m, pid_n, M, N, stride_om, BLOCK_M, BLOCK_N)


@triton.jit(do_not_specialize=["M"])
def tma_kernel(x_desc, w_desc, out_ptr, M, stride_om, N: tl.constexpr, K: tl.constexpr, BLOCK_M: tl.constexpr,
               BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLITS: tl.constexpr, N_MAJOR: tl.constexpr):
    # The plan's nested range loops with descriptor loads (rows past M arrive as zeros).
    pid_m, pid_n = _tile_ids(N_MAJOR)
    SPAN: tl.constexpr = K // SPLITS
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for split in tl.static_range(SPLITS):
        part = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(split * SPAN, (split + 1) * SPAN, BLOCK_K):
            x = x_desc.load([pid_m * BLOCK_M, k0])
            w = w_desc.load([pid_n * BLOCK_N, k0])
            part = tl.dot(x, w.T, part, input_precision="ieee")
        acc = part if split == 0 else acc + part
    _store_tile(out_ptr, acc, pid_m, pid_n, M, N, stride_om, BLOCK_M, BLOCK_N)


def _entry(base: PlanEntry, bm: int, bn: int, warps: int, stages: int, n_major: bool, splits: int) -> PlanEntry:
    """``base`` (the plan's prefill entry) with another tile, order or number of ranges."""
    c = {**base.constexpr_dict(), "BLOCK_M": bm, "BLOCK_N": bn, "N_MAJOR": n_major, "SPLITS": splits,
         "LOCKSTEP": False}
    static = dict(base.static)
    static.pop("min_rows", None)
    config = configs.LaunchConfig(kernel="matmul", key="matmul.bench", num_warps=warps, num_stages=stages,
                                  constexprs=tuple(sorted(c.items())), static=tuple(sorted(static.items())))
    return PlanEntry.from_config(config, ("bench",))


def _grid(m: int, n: int, bm: int, bn: int, n_major: bool) -> tuple[int, int]:
    grid = (triton.cdiv(m, bm), triton.cdiv(n, bn))
    return grid[::-1] if n_major else grid


def parse_tiles(text: str) -> list[tuple[int, int, int, int, bool]]:
    """``128x64w8s4n,...`` (n: column tiles first, m: row tiles first) as (BM, BN, warps, stages, N_MAJOR);
    ValueError names the first item that is not of that form."""
    out = []
    for item in filter(None, text.split(",")):
        m = re.fullmatch(r"(\d+)x(\d+)w(\d+)s(\d+)([nm])", item)
        if m is None:
            raise ValueError(f"{item!r} is not a tile like 128x64w8s4n (BLOCK_M x BLOCK_N, warps, stages, "
                             "n: column tiles first or m: row tiles first)")
        out.append((int(m[1]), int(m[2]), int(m[3]), int(m[4]), m[5] == "n"))
    return out


def forms(base: PlanEntry, n: int, k: int, tiles: list, kinds: set[str]) -> list[tuple[str, bool, object]]:
    """(name, expected to keep the plan's bits, factory(x, w, out) -> call)."""
    c = base.constexpr_dict()
    splits, bk = c.get("SPLITS", 1), c["BLOCK_K"]
    out: list[tuple[str, bool, object]] = [("plan", True, lambda x, w, o: lambda: launch_matmul(x, w, None, o, base))]
    for bm, bn, warps, stages, n_major in tiles if "tiles" in kinds else []:
        e = _entry(base, bm, bn, warps, stages, n_major, splits)
        out.append((f"tile {bm}x{bn} w{warps} s{stages} {'n' if n_major else 'm'}-major", True,
                    lambda x, w, o, e=e: lambda: launch_matmul(x, w, None, o, e)))
    bm, bn, warps, stages, n_major = c["BLOCK_M"], c["BLOCK_N"], base.num_warps, base.num_stages, c["N_MAJOR"]

    def padded(pad_x: int, pad_w: int):
        def make(x, w, o):
            xp = torch.zeros(x.shape[0], k + pad_x, dtype=x.dtype, device=x.device)[:, :k]
            wp = torch.zeros(n, k + pad_w, dtype=w.dtype, device=w.device)[:, :k]
            xp.copy_(x)
            wp.copy_(w)
            grid = _grid(x.shape[0], n, bm, bn, n_major)
            return lambda: matmul_kernel[grid](xp, wp, wp, o, x.shape[0], xp.stride(0), wp.stride(0), o.stride(0),
                                               **launch_kwargs(base))
        return make
    out += [(f"stride pad x+{px} w+{pw}", True, padded(px, pw)) for px, pw in PADS if "pad" in kinds]
    for stg in (3, 4) if "flat" in kinds else ():
        def flat(x, w, o, stg=stg):
            grid = _grid(x.shape[0], n, bm, bn, n_major)
            return lambda: flat_kernel[grid](x, w, o, x.shape[0], x.stride(0), w.stride(0), o.stride(0), N=n, K=k,
                                             BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, SPLITS=splits, N_MAJOR=n_major,
                                             num_warps=warps, num_stages=stg)
        out.append((f"flat s{stg}", True, flat))
    for stg in (3, 4) if "tma" in kinds else ():
        def tma(x, w, o, stg=stg):
            xd = TensorDescriptor.from_tensor(x, [bm, bk])
            wd = TensorDescriptor.from_tensor(w, [bn, bk])
            grid = _grid(x.shape[0], n, bm, bn, n_major)
            return lambda: tma_kernel[grid](xd, wd, o, x.shape[0], o.stride(0), N=n, K=k, BLOCK_M=bm, BLOCK_N=bn,
                                            BLOCK_K=bk, SPLITS=splits, N_MAJOR=n_major, num_warps=warps,
                                            num_stages=stg)
        out.append((f"tma s{stg}", True, tma))
    if "one" in kinds:
        one = _entry(base, bm, bn, warps, stages, n_major, 1)
        out.append(("one range (other bits)", False, lambda x, w, o: lambda: launch_matmul(x, w, None, o, one)))
    return out


def sweep(role: str, n: int, k: int, dtype: str, out_dtype: str, ms: list[int], tiles: list,
          kinds: set[str]) -> dict:
    base = PlanEntry.from_config(configs.prefill_matmul_config(n=n, k=k, dtype=dtype, has_bias=False,
                                                               out_dtype=out_dtype), ("bench",))
    w = (torch.randn(n, k, device="cuda") * k ** -0.5).to(torch_dtype(dtype))
    xs = {m: torch.randn(m, k, device="cuda").to(torch_dtype(dtype)) for m in ms}
    outs = {m: torch.empty(m, n, dtype=torch_dtype(out_dtype), device="cuda") for m in ms}
    xa, wa = adversarial(max(ms), k, dtype, 5), adversarial(n, k, dtype, 6)
    want = torch.empty(max(ms), n, dtype=torch_dtype(out_dtype), device="cuda")
    launch_matmul(xa, wa, None, want, base)
    bits = torch.int16 if out_dtype == "bfloat16" else torch.int32
    c = base.constexpr_dict()
    row: dict = {"role": role, "n": n, "k": k, "plan": base.key, "flops_per_row": 2 * n * k, "forms": [],
                 "plan_tile": f"{c['BLOCK_M']}x{c['BLOCK_N']}x{c['BLOCK_K']} w{base.num_warps} s{base.num_stages}, "
                              f"{c.get('SPLITS', 1)} ranges"}
    row["forms"].append({"name": "torch (cuBLAS)", "us": {m: time_calls(
        [lambda m=m: torch.mm(xs[m], w.t(), out=outs[m])], device="cuda", repeats=REPEATS)[0]
        for m in ms}})
    for name, keeps_bits, make in forms(base, n, k, tiles, kinds):
        rec: dict = {"name": name, "us": {}}
        row["forms"].append(rec)
        try:
            for m in ms:
                rec["us"][m] = time_calls([make(xs[m], w, outs[m])], device="cuda", repeats=REPEATS)[0]
            got = torch.empty_like(want)
            make(xa, wa, got)()
            torch.cuda.synchronize()
            differ = int((got.view(bits) != want.view(bits)).sum())
            rec["differ"] = differ
            rec["expected_to_keep_bits"] = keeps_bits
        except Exception as exc:  # a candidate that does not compile or fit is a finding, not a crash
            rec["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        print(f"{name}: {rec.get('us')} {rec.get('differ', rec.get('error'))}", file=sys.stderr, flush=True)
    return row


def _bits(rec: dict) -> str:
    """The bits column: equal, elements differing (and whether that was expected), or the error."""
    if "error" in rec:
        return rec["error"]
    if "differ" not in rec:
        return ""
    if rec["differ"] == 0:
        return "equal" if rec["expected_to_keep_bits"] else "equal (expected to differ)"
    return f"{rec['differ']} differ" + ("" if rec["expected_to_keep_bits"] else " (expected)")


def markdown(results: dict) -> str:
    ms = results["ms"]
    lines = [f"# Prefill forms of weights with K ranges ({results['preset']}, {results['device']})", "",
             "µs per call (TFLOP/s), CUDA-graph replays; bits against the plan's entry on adversarial values", ""]
    for row in results["weights"]:
        lines += [f"## {row['role']} {row['n']} x {row['k']} (plan {row['plan']}: {row['plan_tile']})", "",
                  "| form | " + " | ".join(f"M = {m}" for m in ms) + " | bits |", "|---" * (len(ms) + 2) + "|"]
        for rec in row["forms"]:
            cells = [f"{rec['us'][m]:.0f} ({row['flops_per_row'] * m / rec['us'][m] / 1e6:.0f})"
                     if m in rec.get("us", {}) else "–" for m in ms]
            lines.append(f"| {rec['name']} | " + " | ".join(cells) + f" | {_bits(rec)} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--preset", default="llama-1b")
    parser.add_argument("--roles", default="down")
    parser.add_argument("--ms", default="4096,8192", help="prefill row counts to time")
    parser.add_argument("--tiles", default=TILES, help="tiles of the plan's kernel to time, as 128x64w8s4n")
    parser.add_argument("--forms", default=FORMS, help=f"which forms to time besides the plan's entry ({FORMS})")
    args = parser.parse_args(argv)
    try:
        tiles = parse_tiles(args.tiles)
    except ValueError as exc:
        parser.error(f"--tiles: {exc}")
    try:
        ms = sorted(int(m) for m in args.ms.split(","))
    except ValueError:
        parser.error(f"--ms {args.ms}: expected row counts separated by commas, like 4096,8192")
    kinds, known = set(args.forms.split(",")), set(FORMS.split(","))
    if kinds - known:
        parser.error(f"--forms: unknown {', '.join(sorted(kinds - known))}; known: {FORMS}")
    dtype = preset(args.preset).dtype
    todo = [w for w in weights(args.preset) if w[0] in args.roles.split(",")]
    ranged = [w for w in todo if configs.matmul_ranges(n=w[1], k=w[2], dtype=dtype) > 1
              and configs.prefill_matmul_config(n=w[1], k=w[2], dtype=dtype, has_bias=False, out_dtype=w[3])]
    if not ranged:
        parser.error(f"--roles {args.roles}: no weight of {args.preset} with K ranges and a prefill bucket among "
                     f"{', '.join(w[0] for w in weights(args.preset))}")
    if not torch.cuda.is_available():
        parser.error("needs a CUDA GPU")
    results: dict = {"preset": args.preset, "ms": ms, "device": torch.cuda.get_device_name(), "weights": []}
    args.out.mkdir(parents=True, exist_ok=True)
    for role, n, k, out_dtype in ranged:
        results["weights"].append(sweep(role, n, k, dtype, out_dtype, ms, tiles, kinds))
        (args.out / "deep_prefill.json").write_text(json.dumps(results, indent=1))
        (args.out / "deep_prefill.md").write_text(markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
