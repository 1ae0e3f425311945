"""Host cost of handing a decode step's rows to the host: engine.host_logits.HostLogits against the
eight-copy form it replaced.

    PYTHONPATH=. python3 bench/host_copy.py [--rows 4] [--vocab 128256] [--calls 2000] [--out FILE]

Each variant enqueues the copy of ``--rows`` float32 rows of ``--vocab`` entries, their greedy
and input tokens and ``--rows`` finiteness flags (``start``), then waits for it (``wait``), as a
decode step does; the device is otherwise idle, so what is timed is the host's own work
(``time.perf_counter`` around each call, medians in µs). Variants alternate in blocks of 100
calls. Every variant's rows, tokens, inputs and flags are checked against the sources, bit for
bit. ``eight copies`` is the previous implementation, kept here (not in the engine) so the
figures reproduce; ``packed, one foreach copy`` fills the packed slot with one
``torch._foreach_copy_`` of byte views and switches streams with ``torch.cuda.stream`` (the
engine's first packed form), ``packed, torch.cuda.stream`` is the engine's form with that
context manager instead of ``torch.cuda.set_stream``. Prints a JSON object; needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import wait
from pathlib import Path
from typing import Any

_BENCH = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]
sys.path.insert(0, str(_BENCH.parent))

import torch  # noqa: E402

from engine.host_logits import HostFetch, HostLogits  # noqa: E402


class EightCopies:
    """The previous form: four copies into device slots, four copies to pinned host slots."""

    def __init__(self, *, max_num_rows: int, vocab_size: int, max_num_flags: int, num_slots: int = 4) -> None:
        self._logits = [torch.empty(max_num_rows, vocab_size, pin_memory=True) for _ in range(num_slots)]
        self._flags = [torch.empty(max_num_flags, pin_memory=True) for _ in range(num_slots)]
        self._device_flags = [torch.empty(max_num_flags, device="cuda") for _ in range(num_slots)]
        self._tokens = [torch.empty(max_num_rows, dtype=torch.int64, pin_memory=True) for _ in range(num_slots)]
        self._inputs = [torch.empty(max_num_rows, dtype=torch.int64, pin_memory=True) for _ in range(num_slots)]
        self._device_logits = [torch.empty(max_num_rows, vocab_size, device="cuda") for _ in range(num_slots)]
        self._device_ids = [torch.empty(2, max_num_rows, dtype=torch.int64, device="cuda") for _ in range(num_slots)]
        self._readers: list[list] = [[] for _ in range(num_slots)]
        self._staged = [torch.cuda.Event() for _ in range(num_slots)]
        self._copied = [torch.cuda.Event() for _ in range(num_slots)]
        self._copy_stream = torch.cuda.Stream()
        self._last = 0

    def start(self, logits, tokens, num_rows, nonfinite, input_ids=None) -> HostFetch:
        slot = (self._last + 1) % len(self._logits)
        wait(self._readers[slot])
        self._readers[slot] = []
        self._last = slot
        step_stream, n = torch.cuda.current_stream(), num_rows
        step_stream.wait_event(self._copied[slot])
        device_logits, device_ids = self._device_logits[slot][:n], self._device_ids[slot][:, :n]
        num_flags = nonfinite.shape[0]
        device_flags = self._device_flags[slot][:num_flags]
        device_flags.copy_(nonfinite)
        device_logits.copy_(logits[:n])
        device_ids[0].copy_(tokens[:n])
        if input_ids is not None:
            device_ids[1].copy_(input_ids[:n])
        self._staged[slot].record(step_stream)
        self._copy_stream.wait_event(self._staged[slot])
        with torch.cuda.stream(self._copy_stream):
            self._logits[slot][:n].copy_(device_logits, non_blocking=True)
            self._tokens[slot][:n].copy_(device_ids[0], non_blocking=True)
            self._flags[slot][:num_flags].copy_(device_flags, non_blocking=True)
            if input_ids is not None:
                self._inputs[slot][:n].copy_(device_ids[1], non_blocking=True)
            self._copied[slot].record(self._copy_stream)
        return HostFetch(slot, num_rows, input_ids is not None, num_flags)

    def wait(self, fetch: HostFetch):
        self._copied[fetch.slot].synchronize()
        n, slot = fetch.num_rows, fetch.slot
        inputs = self._inputs[slot][:n].tolist() if fetch.has_inputs else None
        return self._logits[slot][:n], self._tokens[slot][:n].tolist(), inputs, self._flags[slot][:fetch.num_flags].clone()


def _bytes(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(-1).view(torch.uint8)


class PackedUnderStreamContext(HostLogits):
    """The packed slot with the copy stream entered through ``torch.cuda.stream``; filled by one
    ``copy_`` per source (``foreach=False``) or by one ``torch._foreach_copy_`` of byte views."""

    def __init__(self, *, foreach: bool, **sizes: int) -> None:
        super().__init__(**sizes)
        self._foreach = foreach

    def start(self, logits, tokens, num_rows, nonfinite, input_ids=None) -> HostFetch:
        slot = (self._last + 1) % len(self._host)
        wait(self._readers[slot])
        self._readers[slot] = []
        self._last = slot
        step_stream, n, num_flags = torch.cuda.current_stream(), num_rows, nonfinite.shape[0]
        step_stream.wait_event(self._copied[slot])
        device = self._device[slot]
        targets = [device.flags[:num_flags], device.logits[:n], device.tokens[:n]]
        sources = [nonfinite, logits[:n], tokens[:n]]
        if input_ids is not None:
            targets.append(device.inputs[:n])
            sources.append(input_ids[:n])
        if self._foreach:
            torch._foreach_copy_([_bytes(t) for t in targets], [_bytes(s) for s in sources])
        else:
            for target, source in zip(targets, sources):
                target.copy_(source)
        self._staged[slot].record(step_stream)
        self._copy_stream.wait_event(self._staged[slot])
        used = device.used_bytes(n)
        with torch.cuda.stream(self._copy_stream):
            self._host[slot].raw[:used].copy_(device.raw[:used], non_blocking=True)
            self._copied[slot].record(self._copy_stream)
        return HostFetch(slot, num_rows, input_ids is not None, num_flags)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4, help="sampled rows a step (the benchmark's batch)")
    parser.add_argument("--vocab", type=int, default=128256, help="vocabulary size (llama-1b's by default)")
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per variant")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    if not 1 <= args.rows <= 16 or args.vocab < 1 or args.calls < 100:
        parser.error("--rows must be 1 to 16, --vocab positive and --calls at least 100")
    if not torch.cuda.is_available():
        print("bench/host_copy.py needs a CUDA GPU; torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    sizes = dict(max_num_rows=16, vocab_size=args.vocab, max_num_flags=max(16, args.rows))
    variants: dict[str, Any] = {"packed (engine)": HostLogits(**sizes),
                                "packed, torch.cuda.stream": PackedUnderStreamContext(foreach=False, **sizes),
                                "packed, one foreach copy": PackedUnderStreamContext(foreach=True, **sizes),
                                "eight copies": EightCopies(**sizes)}
    logits = torch.randn(16, args.vocab, device="cuda")
    logits[0, 1] = float("nan")
    tokens = torch.randint(0, args.vocab, (16,), device="cuda")
    inputs = torch.randint(0, args.vocab, (16,), device="cuda")
    flags = torch.zeros(args.rows, device="cuda")
    expected = (logits[:args.rows].cpu().view(torch.int32), tokens[:args.rows].tolist(), inputs[:args.rows].tolist())
    times: dict[str, dict[str, list[float]]] = {name: {"start": [], "wait": []} for name in variants}
    for _ in range(args.calls // 100 + 1):  # the first block of each variant warms up
        for name, host in variants.items():
            for _ in range(100):
                t0 = time.perf_counter()
                fetch = host.start(logits, tokens, args.rows, flags, inputs)
                t1 = time.perf_counter()
                rows, got_tokens, got_inputs, got_flags = host.wait(fetch)
                t2 = time.perf_counter()
                times[name]["start"].append(t1 - t0)
                times[name]["wait"].append(t2 - t1)
            if not (torch.equal(rows.view(torch.int32), expected[0]) and got_tokens == expected[1]
                    and got_inputs == expected[2] and torch.equal(got_flags, flags.cpu())):
                raise AssertionError(f"{name}: what came back differs from what was sent")
    report = {"rows": args.rows, "vocab": args.vocab, "calls": args.calls, "device": torch.cuda.get_device_name(),
              "us": {name: {phase: round(1e6 * statistics.median(v[100:]), 2) for phase, v in t.items()}
                     for name, t in times.items()}}
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
