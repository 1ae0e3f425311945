"""The markdown summary of bench/engine_gpu.py's results (the JSON holds every run)."""

from __future__ import annotations

from typing import Any

from bench.engine_gpu_common import roofline_tokens_per_s
from bench.engine_gpu_profile import profile_markdown

__all__ = ["markdown"]


def _median(entry: Any) -> float | None:
    if not isinstance(entry, dict) or "tokens_per_s" not in entry:
        return None
    return entry["tokens_per_s"].get("median")


def _cell(entry: Any) -> str:
    """``median (min–max)`` of a measured entry, the reason it is missing otherwise."""
    if not isinstance(entry, dict):
        return "not run"
    if "error" in entry:
        return "failed: " + entry["error"].strip().splitlines()[-1][:80]
    if "tokens_per_s" not in entry:
        return entry.get("skipped", "not run")
    s = entry["tokens_per_s"]
    return f"{s['median']:,.0f} ({s['min']:,.0f}–{s['max']:,.0f})"


def _ratio(a: float | None, b: float | None, spec: str = ".1f", suffix: str = "×") -> str:
    return f"{a / b:{spec}}{suffix}" if a and b else ""


def _decode_table(results: dict[str, Any], spec: Any) -> list[str]:
    parts = results["parts"]
    engine = parts.get("engine_decode", {}).get("result", {})
    graphs, serial, eager = engine.get("graphs", {}), engine.get("graphs_step_by_step", {}), engine.get("eager", {})
    torch_loop = parts.get("torch_eager", {}).get("result", {})
    compiled = parts.get("torch_compiled", {}).get("result") or {}
    hf = parts.get("transformers", {}).get("result", {}).get("decode", {})
    rate = parts.get("copy_rate", {}).get("result", {}).get("bytes_per_s")
    lines = ["| cached context | engine, CUDA graphs | % roofline | graphs, one step at a time | engine, eager | "
             "torch eager loop | torch compiled | transformers generate | engine / transformers | engine / compiled | "
             "roofline |", "|" + "---|" * 11]
    for context in results["config"]["contexts"]:
        key = str(context)
        g = graphs.get(key)
        roof = None
        if rate and isinstance(g, dict) and "batch" in g:
            roof = roofline_tokens_per_s(spec, batch=g["batch"], context=context, new_tokens=g["new_tokens"],
                                         copy_rate=rate)
        lines.append(f"| {context:,} | {_cell(g)} | {_ratio(_median(g), roof, '.0%', '')} | {_cell(serial.get(key))} | "
                     f"{_cell(eager.get(key))} | "
                     f"{_cell(torch_loop.get(key))} | {_cell(compiled.get(key))} | {_cell(hf.get(key))} | "
                     f"{_ratio(_median(g), _median(hf.get(key)))} | {_ratio(_median(g), _median(compiled.get(key)))} | "
                     f"{'' if roof is None else f'{roof:,.0f}'} |")
    return lines


def _collector_line(results: dict[str, Any]) -> list[str]:
    """How many full passes of the cyclic collector ran inside the timed decode runs, and the longest."""
    engine = results["parts"].get("engine_decode", {}).get("result", {})
    runs = [run for mode in ("graphs", "graphs_step_by_step", "eager") for entry in engine.get(mode, {}).values()
            if isinstance(entry, dict) for run in entry.get("gc_full_passes_ms", [])]
    if not runs:
        return []
    passes = [ms for run in runs for ms in run]
    frozen = "frozen first" if results["config"].get("gc_freeze", True) else "not frozen"
    longest = f", longest {max(passes):.0f} ms" if passes else ""
    return ["", f"Full passes of the cyclic collector inside the {len(runs)} timed decode runs (collector {frozen}): "
                f"{len(passes)}{longest}."]


def _prefill_table(results: dict[str, Any]) -> list[str]:
    parts = results["parts"]
    engine = parts.get("engine_prefill", {}).get("result", {}).get("shapes", {})
    hf = parts.get("transformers", {}).get("result", {}).get("prefill", {})
    lines = ["| batch × prompt tokens | engine | transformers | engine / transformers |", "|---|---|---|---|"]
    for key in sorted(set(engine) | set(hf)):
        lines.append(f"| {key} | {_cell(engine.get(key))} | {_cell(hf.get(key))} | "
                     f"{_ratio(_median(engine.get(key)), _median(hf.get(key)))} |")
    return lines


def _multi_turn(results: dict[str, Any]) -> list[str]:
    mt = results["parts"].get("multi_turn", {}).get("result")
    if not mt:
        return ["not run"]
    spec = mt["spec"]
    lines = [f"{spec['num_sessions']} sessions × {spec['num_turns']} turns, first prompt {spec['first_prompt_tokens']:,} "
             f"tokens ({spec['shared_prefix_tokens']:,} shared, cached), +{spec['follow_up_tokens']} tokens per "
             f"follow-up, {spec['output_tokens']} output tokens per turn, {spec['think_s']} s between turns; "
             f"{'complete' if mt['complete'] else 'INCOMPLETE (time budget)'}, wall {mt['wall_s']:.1f} s, "
             f"{mt['output_tokens_per_s']:,.0f} output tok/s.", "",
             "| session | completion s | turns finished |", "|---|---|---|"]
    for i, s in enumerate(mt["sessions"]):
        done = "" if s["completion_s"] is None else f"{s['completion_s']:.1f}"
        lines.append(f"| {i} | {done} | {s['turns_finished']} |")
    for name in ("turn_latency_s", "time_to_first_token_s"):
        s = mt[name]
        if s.get("n"):
            lines.append(f"\n{name}: median {s['median']:.2f} s (min {s['min']:.2f}, max {s['max']:.2f}, n {s['n']})")
    return lines


def markdown(results: dict[str, Any], spec: Any) -> str:
    """Decode, prefill, multi-turn and determinism tables, then each part's status."""
    env, config = results["environment"], results["config"]
    rate = results["parts"].get("copy_rate", {}).get("result", {}).get("bytes_per_s")
    det = results["parts"].get("determinism", {}).get("result")
    pdl = "" if config.get("pdl", True) else ", plans without programmatic dependent launch"
    pdl += "" if config.get("gc_freeze", True) else ", collector not frozen"
    lines = [f"# Engine GPU benchmark ({'quick' if config['quick'] else 'full'}{pdl})", "",
             f"{env.get('gpu', 'no GPU')}; torch {env['torch']}, triton {env['triton']}, transformers "
             f"{env.get('transformers')}, CUDA {env.get('cuda')}; copy rate "
             f"{'not measured' if not rate else f'{rate / 1e12:.2f} TB/s'}", "",
             f"## Decode tokens/s, batch {config['batch']}, {config['new_tokens']} new tokens "
             f"(transformers: {config['hf_new_tokens']}); median (min–max) of {config['repeats']} runs", "",
             *_decode_table(results, spec), *_collector_line(results), "", "## Decode step: launches and GPU time by kernel", "",
             *profile_markdown(results["parts"].get("decode_profile", {}).get("result")), "## Prefill tokens/s", "", *_prefill_table(results), "",
             "## Multi-turn sessions", "", *_multi_turn(results), "", "## Determinism (bitwise)", ""]
    if det:
        lines.append(f"all equal: **{det['all_equal']}**\n")
        lines += [f"- {c['check']}: {'equal' if c['equal'] else 'DIFFERENT: ' + '; '.join(c['problems'][:3])}"
                  for c in det["checks"]]
    else:
        lines.append("not run")
    lines += ["", "## Parts", "", "| part | status | seconds |", "|---|---|---|"]
    for name, part in results["parts"].items():
        status = "ok" if "result" in part else ("failed: " + part.get("error", "").strip().splitlines()[-1][:120]
                                                if part.get("error") else part.get("skipped", "?"))
        lines.append(f"| {name} | {status} | {part.get('seconds', 0):.1f} |")
    return "\n".join(lines) + "\n"
