"""Host cost of sampling one row: ``engine.sampler.sample`` with its top-p cut against the whole-row sort.

    PYTHONPATH=. python3 bench/sampler.py [--vocab 32000,128256,262144] [--repeats 15] [--out FILE]

For each vocabulary size and logit spread (normal logits times ``--spreads``: small spreads give
flat rows with large nuclei, large ones peaked rows with small nuclei), ``sample`` of one float32
row (temperature 0.8, top-p 0.9 and 0.95, top-k 0 and 50) runs in alternating pairs: once as it
is, once with its cut replaced by ``engine.sampler.whole_row_cut`` (a stable descending sort of
the whole row: what it computes, by definition). Both must give the same token. Rates are per
second of this process's CPU time (``time.process_time``), single-threaded as the engine
samples (``num_threads`` 1 by default), so other load on a shared machine barely moves them;
reported are the median ms of each and the median ratio of the pairs. Prints a JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

_BENCH = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]
sys.path.insert(0, str(_BENCH.parent))

import torch  # noqa: E402

from engine import sampler  # noqa: E402
from engine.sampling_params import SamplerState, SamplingParams  # noqa: E402


def _timed(row: torch.Tensor, params: SamplingParams, state: SamplerState) -> tuple[int, float]:
    start = time.process_time()
    token, _ = sampler.sample(row, params, state)
    return token, time.process_time() - start


def measure(vocab_size: int, spread: float, params: SamplingParams, repeats: int) -> dict[str, Any]:
    """Median ms per row with the candidates' cut and with the whole-row sort, and their ratio."""
    row = (torch.randn(vocab_size, generator=torch.Generator().manual_seed(vocab_size), dtype=torch.float32)
           * spread)
    x = row.double() / params.temperature
    if params.top_k:  # as sample() masks it, so the nucleus counted is the one it samples from
        x = torch.where(x < torch.topk(x, params.top_k).values[-1], float("-inf"), x)
    probs = torch.softmax(x, dim=0)
    nucleus_size = int((sampler.nucleus(probs, params.top_p) > 0).sum())
    own, whole, ratios = [], [], []
    candidates_cut = sampler.nucleus
    for r in range(repeats):
        state = SamplerState(seed=7, counter=r)
        pair = {}
        for name in (("own", "whole") if r % 2 == 0 else ("whole", "own")):
            sampler.nucleus = candidates_cut if name == "own" else sampler.whole_row_cut
            try:
                pair[name] = _timed(row, params, state)
            finally:
                sampler.nucleus = candidates_cut
        if pair["own"][0] != pair["whole"][0]:
            raise AssertionError(f"vocab {vocab_size}, spread {spread}, {params}: token {pair['own'][0]} with "
                                 f"the candidates' cut, {pair['whole'][0]} with the whole-row sort")
        own.append(pair["own"][1])
        whole.append(pair["whole"][1])
        ratios.append(pair["whole"][1] / max(pair["own"][1], 1e-9))
    return {"vocab_size": vocab_size, "spread": spread, "top_p": params.top_p, "top_k": params.top_k,
            "nucleus_size": nucleus_size, "ms_per_row": round(1e3 * statistics.median(own), 3),
            "whole_row_sort_ms_per_row": round(1e3 * statistics.median(whole), 3),
            "speedup_median": round(statistics.median(ratios), 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", default="32000,128256,262144", help="comma-separated vocabulary sizes")
    parser.add_argument("--spreads", default="1,4,8", help="comma-separated standard deviations of the logits")
    parser.add_argument("--repeats", type=int, default=15, help="pairs per case (at least 3)")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    try:
        vocab_sizes = [int(v) for v in args.vocab.split(",") if v]
        spreads = [float(s) for s in args.spreads.split(",") if s]
    except ValueError as exc:
        parser.error(f"--vocab and --spreads are comma-separated numbers: {exc}")
    if args.repeats < 3 or not vocab_sizes or not spreads or min(vocab_sizes) < 1 or min(spreads) <= 0:
        parser.error("need --repeats >= 3, vocabulary sizes >= 1 and spreads > 0")
    torch.set_num_threads(1)
    cases = [measure(v, s, SamplingParams(temperature=0.8, top_p=p, top_k=k), args.repeats)
             for v in vocab_sizes for s in spreads for p in (0.9, 0.95) for k in (0, 50)]
    result = {"torch": torch.__version__, "threads": torch.get_num_threads(), "repeats": args.repeats,
              "cases": cases}
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
