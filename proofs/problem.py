"""One verification problem: a kernel, its contract, and two launches A and B.

Holds the two launches' IRs and symbols, their premises (grid ranges, integer argument ranges,
the contract's per-launch ``assume`` and relational ``same`` premises) and the solver context.
Contents of integer tensors get their premises (value ranges, distinctness) whenever they
occur in a query.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import z3

from proofs.contract import Contract, TensorSpec
from proofs.names import LaunchNames
from proofs.smt import Ctx, Obligation
from proofs.source import KernelSource
from proofs.tir import KernelIR

__all__ = ["Launch", "Problem"]


@dataclass(slots=True)
class Launch:
    run: str
    ir: KernelIR
    names: LaunchNames

    def strides(self, spec: TensorSpec) -> tuple:
        return tuple(self.names.expr(s) if isinstance(s, str) else s for s in spec.strides)

    def dims(self, spec: TensorSpec) -> tuple:
        return tuple(self.names.expr(d) for d in spec.shape)

    def base_premises(self) -> list[z3.BoolRef]:
        out = []
        for pid, size in zip(self.ir.pids, self.ir.grid):
            out += [pid >= 0, pid < size]
        for name, spec in self.names.contract.params.items():
            if spec.dtype == "int32":
                v = self.names.param(name)
                out += [v >= -(2**31), v < 2**31]
        out += [self.names.expr(text) for text in self.names.contract.assume]
        return out


@dataclass(slots=True)
class Problem:
    """Everything the passes share; ``ctx`` starts with both launches' premises assumed."""

    src: KernelSource
    contract: Contract
    A: Launch
    B: Launch
    timeout_ms: int = 60000
    ctx: Ctx = field(init=False)
    premises_used: list[str] = field(default_factory=list)
    demand: dict[str, str] = field(default_factory=dict)  # tensor -> how its demanded reads are related
    identities: list[str] = field(default_factory=list)
    _instances: dict = field(default_factory=dict)  # instantiated each-premises, by (premise, elements)
    _keep: list = field(default_factory=list)  # keeps instantiated elements alive (their ids key the cache)

    def __post_init__(self) -> None:
        self.ctx = Ctx(self.timeout_ms, self.app_premises)

    def launch(self, run: str) -> Launch:
        return self.A if run == "A" else self.B

    def relational_premises(self) -> list[z3.BoolRef]:
        return [self.A.names.expr(e) == self.B.names.expr(e) for e in self.contract.same]

    def app_premises(self, new: list, known: list) -> list[z3.BoolRef]:
        """Premises about integer-tensor contents newly occurring in a query: value ranges,
        ``each`` premises (for every combination with known elements too) and distinctness."""
        out, done = [], set()
        by_name: dict[str, list] = {}
        for a in list(known) + list(new):
            by_name.setdefault(a.decl().name(), []).append(a)
        for app in new:
            decl = app.decl().name()
            name, _, run = decl.rpartition("@")
            spec = self.contract.tensors.get(name)
            if spec is None:
                continue
            names = self.launch(run).names
            for tensors, placeholders, premise in names.each(name):
                choices = [by_name.get(f"{t}@{run}", []) for t in tensors]
                for combo in itertools.product(*choices):
                    ids = tuple(a.get_id() for a in combo)
                    key = (premise.get_id(), ids)
                    if app.get_id() not in ids or key in done:
                        continue
                    done.add(key)
                    inst = self._instances.get(key)
                    if inst is None:
                        args = [c for a in combo for c in a.children()]
                        inst = self._instances[key] = z3.substitute(premise, *zip(placeholders, args))
                        self._keep.append(combo)
                    out.append(inst)
            if spec.values is not None:
                lo, hi = (names.expr(v) for v in spec.values)
                out += [app >= lo, app < hi]
            if spec.distinct:
                for other in by_name[decl]:
                    if other.get_id() != app.get_id():
                        differ = z3.Or(*[p != q for p, q in zip(app.children(), other.children())])
                        out.append(z3.Implies(z3.And(differ, app >= 0, other >= 0), app != other))
        return out

    def counterexample(self, model: dict[str, int]) -> dict[str, Any]:
        """Split a model into launch A, launch B and shared values (internal names dropped)."""
        out: dict[str, Any] = {"A": {}, "B": {}, "shared": {}}
        for name, value in model.items():
            if name.startswith(("drift", "undef", "opaque")):
                continue
            base, _, run = name.rpartition("@")
            if run in ("A", "B"):
                out[run][base] = value
            else:
                out["shared"][name] = value
        for run in ("A", "B"):
            cx = self.launch(run).ir.constexprs
            vary = {k: cx[k] for k, v in self.contract.constexprs.items() if type(v).__name__ == "Vary"}
            if vary:
                out[run]["constexprs"] = vary
        return out

    @property
    def obligations(self) -> list[Obligation]:
        return self.ctx.obligations
