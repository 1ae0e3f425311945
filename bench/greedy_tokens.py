"""GPU time of a decode step's small ops outside the matmuls: the greedy token and the slot copies.

    PYTHONPATH=. python3 bench/greedy_tokens.py [--rows 4] [--vocab 128256] [--out FILE]

Greedy token: ``engine.sampler.split_argmax`` of ``--rows`` float32 rows with every part count
that divides the row (1 is plain ``torch.argmax``) among 1, 16 .. 2,048 and the largest divisors,
each checked equal to ``torch.argmax`` on rows with ties across part boundaries, NaN, and
infinities, then timed as 20 calls inside one CUDA graph (µs a call, median of 7 replays); and
the same for ``kernels.greedy.greedy_argmax`` (two Triton launches, what ``greedy_tokens`` runs on
CUDA) wherever a part has at most TRITON_MAX_PART entries.
Slot copies: the four ``copy_`` calls that fill a host slot's device block (flags, rows,
tokens, input tokens; engine/host_logits.py) against one ``torch._foreach_copy_`` of their 4-byte
words, enqueued eagerly 200 times between two CUDA events, as the step loop enqueues them (µs a
step, median of 7); the foreach form's bytes checked equal. Prints a JSON
object; needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

_BENCH = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]
sys.path.insert(0, str(_BENCH.parent))

import torch  # noqa: E402

from engine.sampler import _num_parts, split_argmax  # noqa: E402
from kernels.greedy import greedy_argmax  # noqa: E402

CALLS_PER_GRAPH = 20
TRITON_MAX_PART = 8192


def _words(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """Each contiguous float32 or int64 tensor viewed as flat int32 words (the same bytes)."""
    return [t.reshape(-1).view(torch.int32) for t in tensors]
REPEATS = 7


def part_counts(vocab_size: int) -> list[int]:
    """Part counts to try: 1, powers of two from 16 to 2,048 and a few larger divisors, each dividing the row."""
    divisors = [d for d in range(2, vocab_size) if vocab_size % d == 0 and vocab_size // d >= 32]
    wanted = {1, _num_parts(vocab_size)} | {p for p in (16, 32, 64, 128, 256, 512, 1024, 2048) if vocab_size % p == 0}
    wanted |= set(divisors[-3:]) | {d for d in divisors if 200 <= d <= 4096}
    return sorted(wanted)


def adversarial_rows(num_rows: int, vocab_size: int, parts: list[int], device: str = "cuda") -> list[torch.Tensor]:
    """Rows whose argmax a wrong part rule would miss: ties across part boundaries, NaN, infinities."""
    g = torch.Generator().manual_seed(0)
    rows = [torch.randn(num_rows, vocab_size, generator=g)]
    tie = torch.randn(num_rows, vocab_size, generator=g)
    for p in parts[1:]:  # the same maximum at the last entry of a part and the first of the next
        length = vocab_size // p
        tie[:, length - 1] = tie[:, length] = 100.0
    rows.append(tie)
    special = torch.randn(num_rows, vocab_size, generator=g)
    special[0, vocab_size - 1] = float("nan")
    special[1, 7], special[1, vocab_size // 2] = float("inf"), float("nan")
    special[2, :] = float("-inf")
    special[3 % num_rows, 1000 % vocab_size] = float("inf")
    special[3 % num_rows, 5000 % vocab_size] = float("inf")
    rows.append(special)
    return [r.to(device) for r in rows]


def graph_us(fn: Callable[[], Any]) -> float:
    """Median GPU µs of one ``fn()`` call, from replays of a graph of CALLS_PER_GRAPH calls."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(CALLS_PER_GRAPH):
            fn()
    times = []
    for _ in range(REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(1e3 * start.elapsed_time(end) / CALLS_PER_GRAPH)
    return statistics.median(times)


def eager_us(fn: Callable[[], Any], calls: int = 200) -> float:
    """Median µs a call of ``calls`` eager calls enqueued back to back, GPU time between two events."""
    for _ in range(10):
        fn()
    times = []
    for _ in range(REPEATS):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        times.append(1e3 * start.elapsed_time(end) / calls)
    return statistics.median(times)


def greedy_forms(num_rows: int, vocab_size: int) -> list[dict[str, Any]]:
    parts = part_counts(vocab_size)
    checks = adversarial_rows(num_rows, vocab_size, parts)
    logits = torch.randn(num_rows, vocab_size, device="cuda")
    out = []
    for p in parts:
        def timed(form: Callable[[torch.Tensor, int], torch.Tensor]) -> tuple[bool, float]:
            """Whether ``form`` gives argmax's index on every check row, and its µs a call."""
            equal = all(torch.equal(form(rows, p), torch.argmax(rows, dim=-1)) for rows in checks)
            return equal, round(graph_us(lambda: form(logits, p)), 2)
        equal, us = timed(split_argmax)
        result = {"parts": p, "part_length": vocab_size // p, "is_engine": p == _num_parts(vocab_size),
                  "equal_to_argmax": equal, "us": us}
        if vocab_size // p <= TRITON_MAX_PART:  # one program holds a part: longer ones only spill registers
            result["triton_equal_to_argmax"], result["triton_us"] = timed(greedy_argmax)
        out.append(result)
    return out


def slot_copies(num_rows: int, vocab_size: int) -> dict[str, Any]:
    sources = [torch.randn(num_rows, device="cuda"), torch.randn(num_rows, vocab_size, device="cuda"),
               torch.randint(0, vocab_size, (num_rows,), device="cuda"),
               torch.randint(0, vocab_size, (num_rows,), device="cuda")]
    targets = [torch.empty_like(s) for s in sources]

    def four() -> None:
        for t, s in zip(targets, sources):
            t.copy_(s)

    def one() -> None:
        torch._foreach_copy_(_words(targets), _words(sources))

    for t in targets:
        t.zero_()
    one()
    torch.cuda.synchronize()
    equal = all(torch.equal(t, s) for t, s in zip(targets, sources))
    four_us, one_us = eager_us(four), eager_us(one)
    return {"four_copies_us": round(four_us, 2), "one_foreach_us": round(one_us, 2), "foreach_equal": equal,
            "ratio": round(one_us / four_us, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=128256)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench/greedy_tokens.py needs a CUDA GPU", file=sys.stderr)
        return 2
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": args.rows,
              "vocab": args.vocab, "greedy": greedy_forms(args.rows, args.vocab),
              "slot_copies": slot_copies(args.rows, args.vocab)}
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0 if all(g["equal_to_argmax"] for g in result["greedy"]) and result["slot_copies"]["foreach_equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
