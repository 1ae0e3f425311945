"""Verify one kernel at one configuration against its contract.

Launch A and launch B are the same kernel with the same constexprs (or, for constexprs the
contract declares ``vary``, every pair of allowed values), and all ``batch`` arguments free.
Passes, in order: single-launch safety of each launch and, for a PDL launch, that nothing but
immutable tensors is read before its grid-dependency wait (proofs/pdl.py), writers of the selected output element,
then the relational walk (backward demand, lockstep pairing, value analysis, identity steps).
The first failed obligation decides: a Z3 model makes it REFUTED with a counterexample, a
timeout or an imprecise step UNKNOWN, an operation outside the subset UNSUPPORTED.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import z3

from proofs.contract import Contract, Vary
from proofs.errors import Unsupported
from proofs.interp import build_ir
from proofs.pdl import check_pdl
from proofs.problem import Launch, Problem
from proofs.result import KernelResult, Premise
from proofs.safety import check_safety
from proofs.smt import Failed, Obligation
from proofs.source import KernelSource
from proofs.trusted import assumptions_for
from proofs.walk import Walker
from proofs.writers import check_writers, pair_writers, selected_element
from proofs.z3state import fresh_context

__all__ = ["verify_kernel", "specialization_pairs"]


def specialization_pairs(contract: Contract, constexprs: dict[str, Any]) -> list[tuple[dict, dict]]:
    """(constexprs of A, constexprs of B) for every combination of ``vary`` choices."""
    fixed = {k: v for k, v in contract.constexprs.items() if not isinstance(v, Vary)}
    fixed.update(constexprs)
    vary = {k: v.values for k, v in contract.constexprs.items() if isinstance(v, Vary) and k not in constexprs}
    if not vary:
        return [(fixed, fixed)]
    combos = [dict(zip(vary, vals)) for vals in itertools.product(*vary.values())]
    return [({**fixed, **ca}, {**fixed, **cb}) for i, ca in enumerate(combos) for cb in combos[i:]]


def _ops(ir) -> set[str]:
    seen, out, todo = set(), set(), [a.value for a in ir.stores if a.value is not None]
    todo += [n for lp in ir.loops.values() for n in lp.next.values()]
    for acc in ir.accesses:
        if acc.mask is not None:
            out.add("masked")
    while todo:
        n = todo.pop()
        if not hasattr(n, "op") or n.uid in seen:
            continue
        seen.add(n.uid)
        out.add(n.op)
        todo.extend(n.args)
    return out


def _premises(prob: Problem, checked: dict[str, str]) -> list[Premise]:
    c = prob.contract
    out = [Premise(t, "contract", checked.get(t, "trusted")) for t in c.assume]
    out += [Premise(f"{t} is equal in both launches", "contract", "trusted") for t in c.same]
    out += [Premise(f"{n} has finite contents", "contract", "trusted") for n, t in c.tensors.items() if t.finite]
    out += [Premise(f"{n} values lie in [{t.values[0]}, {t.values[1]})", "contract", "trusted")
            for n, t in c.tensors.items() if t.values]
    out += [Premise(f"non-negative values of {n} are pairwise distinct", "contract", "trusted")
            for n, t in c.tensors.items() if t.distinct]
    out += [Premise(f"for every {' x '.join(e.tensors)} element ({', '.join(e.index)})"
                    + ("" if e.where == "True" else f" with {e.where}") + ": " + " and ".join(e.holds),
                    "contract", "trusted") for e in c.each]
    if c.no_overflow:
        out.append(Premise("float arithmetic on finite values stays finite (no overflow)", "contract", "trusted"))
    out += [Premise(f"integer argument {n} fits in 32 bits", "verifier", "trusted")
            for n, p in c.params.items() if p.dtype == "int32"]
    out += [Premise(f"float argument {n} is finite", "verifier", "trusted")
            for n, p in c.params.items() if p.dtype.startswith("float")]
    out += [Premise(t, "verifier", checked.get(t, "trusted")) for t in prob.premises_used]
    return out


def _problem(src: KernelSource, contract: Contract, ca: dict, cb: dict, static: dict, timeout_ms: int) -> Problem:
    (ir_a, names_a), (ir_b, names_b) = build_ir(src, contract, ca, "A", static), build_ir(src, contract, cb, "B", static)
    return Problem(src, contract, Launch("A", ir_a, names_a), Launch("B", ir_b, names_b), timeout_ms)


def _run(prob: Problem) -> tuple[str, str]:
    ctx, contract = prob.ctx, prob.contract
    # With equal constexprs launch B is launch A renamed (same code, same premises), so its
    # single-launch obligations are A's up to renaming: checking A's covers both.
    symmetric = prob.A.ir.constexprs == prob.B.ir.constexprs
    for launch in (prob.A,) if symmetric else (prob.A, prob.B):
        with ctx.assume(*launch.base_premises()):
            if not ctx.possible(z3.BoolVal(True)):
                return "UNKNOWN", f"the premises of launch {launch.run} are contradictory"
            check_safety(prob, launch)
            check_pdl(prob, launch)
    with ctx.assume(*prob.A.base_premises(), *prob.B.base_premises(), *prob.relational_premises()):
        walker = Walker(prob)
        walker.values.walker = walker
        for spec in contract.outputs:
            sel_a, sel_b, sel_premises = selected_element(prob, spec)
            with ctx.assume(*sel_premises):
                if not ctx.possible(z3.BoolVal(True)):
                    return "UNKNOWN", "the premises and the selected element are contradictory"
                sites_a = check_writers(prob, spec, prob.A, sel_a)
                sites_b = [s for s in prob.B.ir.stores if s.tensor == spec.name] if symmetric else \
                    check_writers(prob, spec, prob.B, sel_b)
                pair_writers(prob, walker, spec, sites_a, sites_b, sel_a, sel_b)
    if symmetric:
        prob.identities.append("launch B's safety and writer obligations are launch A's renamed (same code "
                               "and premises)")
    return "VERIFIED", ""


def verify_kernel(src: KernelSource, contract: Contract, constexprs: dict[str, Any], *, key: str = "",
                  static: dict[str, Any] | None = None, timeout_ms: int = 60000,
                  checked_premises: dict[str, str] | None = None) -> KernelResult:
    """Verify ``src`` against ``contract`` at ``constexprs``; never raises for kernel problems."""
    with fresh_context():  # the verdict must not depend on what this process verified before
        return _verify(src, contract, constexprs, key=key, static=static, timeout_ms=timeout_ms,
                       checked_premises=checked_premises)


def _verify(src: KernelSource, contract: Contract, constexprs: dict[str, Any], *, key: str,
            static: dict[str, Any] | None, timeout_ms: int, checked_premises: dict[str, str] | None) -> KernelResult:
    start = time.perf_counter()
    merged = {k: (list(v.values) if isinstance(v, Vary) else v) for k, v in contract.constexprs.items()}
    config = dict(sorted({**merged, **constexprs}.items()))
    base = dict(kernel=src.name, key=key or src.name, source_file=str(src.path), source_digest=src.digest,
                contract_file=str(contract.path or ""), configuration=config, claim=contract.summary)
    obligations: list[Obligation] = []
    prob = None
    verdict, reason, cex, notes = "VERIFIED", "", {}, []
    for ca, cb in specialization_pairs(contract, constexprs):
        try:
            prob = _problem(src, contract, ca, cb, static or {}, timeout_ms)
            verdict, reason = _run(prob)
        except Failed as exc:
            ob = exc.obligation
            verdict = "REFUTED" if ob.status == "refuted" else "UNKNOWN"
            why = ("no exact-identity rule shows the state unchanged" if ob.pass_name == "identity" else
                   "Z3 answered unknown within its resource limit")
            reason = exc.reason if ob.status == "refuted" else f"not proved: {exc.reason} ({why})"
            cex = prob.counterexample(ob.counterexample) if ob.counterexample else {}
        except Unsupported as exc:
            verdict, reason = "UNSUPPORTED", str(exc)
        if prob is not None:
            obligations += prob.obligations
        if verdict != "VERIFIED":
            if ca != cb:
                reason += f" [launch A constexprs {_diff(ca, cb)}, launch B {_diff(cb, ca)}]"
            break
    ops: set[str] = set()
    if prob is not None:
        ops = _ops(prob.A.ir) | _ops(prob.B.ir)
        notes = sorted(set(prob.A.ir.notes))
    used_zero = prob is not None and any("dot terms" in s for s in prob.identities)
    return KernelResult(**base, verdict=verdict, reason=reason, counterexample=cex, obligations=obligations,
                        premises=_premises(prob, checked_premises or {}) if prob is not None else [],
                        trusted=assumptions_for(ops, used_zero, _finiteness(contract), config.get("PDL") is True),
                        demand=dict(prob.demand) if prob else {},
                        steps=sorted(set(prob.identities)) if prob else [], notes=notes,
                        seconds=time.perf_counter() - start)


def _finiteness(contract: Contract) -> bool:
    return contract.no_overflow or any(t.finite for t in contract.tensors.values())


def _diff(x: dict, y: dict) -> dict:
    return {k: v for k, v in x.items() if y.get(k) != v}
