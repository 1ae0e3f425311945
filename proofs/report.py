"""Human-readable report of a kernel result (GPUVerify/Alive2 style, greppable lines)."""

from __future__ import annotations

from collections import Counter

from proofs.result import KernelResult

__all__ = ["render_text", "verdict_line", "format_counterexample"]

_MEANING = {
    "VERIFIED": "relational invariance of the selected region, under the premises and trusted assumptions "
                "below (not numerical correctness)",
    "REFUTED": "a required obligation has a concrete counterexample",
    "UNKNOWN": "not proved and not refuted",
    "UNSUPPORTED": "the kernel is outside the verified subset",
}


def verdict_line(r: KernelResult) -> str:
    return f"{r.verdict}: {r.reason}" if r.reason else f"{r.verdict}: {_MEANING[r.verdict]}"


def format_counterexample(cex: dict) -> list[str]:
    """One line per launch: its scalars, program ids, iterations and lanes."""
    lines = []
    for part, label in (("A", "launch A"), ("B", "launch B"), ("shared", "both launches")):
        values = dict(cex.get(part, {}))
        constexprs = values.pop("constexprs", None)
        text = " ".join(f"{k}={v}" for k, v in sorted(values.items()))
        if constexprs:
            text += " | constexprs " + " ".join(f"{k}={v}" for k, v in sorted(constexprs.items()))
        if text:
            lines.append(f"  {label}: {text}")
    return lines


def render_text(r: KernelResult) -> str:
    """The full report of one result."""
    by_status = Counter(o.status for o in r.obligations)
    by_pass = Counter(o.pass_name for o in r.obligations if o.status == "proved")
    out = [f"Kernel: {r.kernel}  [{r.key} | {r.source_file} {r.source_digest[:19]}… | contract {r.contract_file}]",
           "Configuration: " + (" ".join(f"{k}={v}" for k, v in r.configuration.items()) or "(none)")]
    if r.claim:
        out.append(f"Claim: {r.claim}")
    out.append(f"Verdict: {verdict_line(r)}")
    if r.counterexample:
        out.append("Counterexample:")
        out += format_counterexample(r.counterexample)
    if r.demand:
        out.append("Demand: " + "; ".join(f"{t} {how}" for t, how in sorted(r.demand.items())))
    for step in r.steps:
        out.append(f"Step: {step}")
    out.append(f"Obligations: {by_status['proved']} proved, {by_status['refuted']} refuted, {by_status['unknown']} "
               f"unknown ({r.seconds:.2f} s)" + ("; proved by pass: " + ", ".join(
                   f"{k} {v}" for k, v in sorted(by_pass.items())) if by_pass else ""))
    if r.premises:
        out.append("Premises:")
        out += [f"  - {p.text}  [{p.checked}]" for p in r.premises]
    if r.trusted:
        out.append("Trusted:")
        out += [f"  - {t.id}: {t.title}" for t in r.trusted]
    out += [f"Note: {n}" for n in r.notes]
    return "\n".join(out)
