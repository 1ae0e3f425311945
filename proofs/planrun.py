"""Verify the entries of a sealed kernel plan, each against its contract in kernels/contracts/.

Targets come from a :class:`kernels.plan.SealedPlan` or from the ``kernel_plan.entries`` of a
deployment configuration D (so a plan sealed for a custom shape is verified as D names it).
The kernel source is read from the file the entry names and must still have the digest the
entry sealed; otherwise the result is UNKNOWN (the proof would be about other code).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from evidence_db.canonical import file_digest
from proofs.contract import load_contract
from proofs.errors import ContractError, KernelSourceError
from proofs.result import KernelResult
from proofs.source import load_kernel

__all__ = ["Target", "targets_from_plan", "targets_from_deployment", "contract_path", "verify_target",
           "verify_targets", "REPO_ROOT"]

REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True, slots=True)
class Target:
    """One sealed (kernel, configuration) to verify."""

    kernel: str  # plan kernel name, e.g. "matmul" (names the contract file)
    key: str
    function: str  # module-qualified jit function
    source_file: str  # relative to the repository root
    source_digest: str
    constexprs: dict[str, Any]
    static: dict[str, Any]


def targets_from_plan(plan) -> list[Target]:
    """Targets of a SealedPlan's entries."""
    return [Target(e.kernel, e.key, e.function, e.source_file, e.source_digest, e.constexpr_dict(), e.static_dict())
            for e in plan.entries]


def targets_from_deployment(fields: dict[str, Any]) -> list[Target] | None:
    """Targets of D's ``kernel_plan.entries``, or None when D does not list them."""
    entries = (fields.get("kernel_plan") or {}).get("entries")
    if not isinstance(entries, list):
        return None
    out = []
    for i, e in enumerate(entries):
        try:
            out.append(Target(e["kernel"], e["key"], e["function"], e["source_file"], e["source_digest"],
                              dict(e["constexprs"]), dict(e.get("static", {}))))
        except (KeyError, TypeError) as exc:
            raise ContractError(f"deployment kernel_plan.entries[{i}] lacks field {exc}") from None
    return out


def contract_path(kernel: str, root: Path = REPO_ROOT) -> Path:
    return root / "kernels" / "contracts" / f"{kernel}.toml"


def verify_target(target: Target, *, root: Path = REPO_ROOT, timeout_ms: int = 60000) -> KernelResult:
    """Verify one plan entry; a missing contract or changed source is UNKNOWN, not an exception."""
    from proofs.driver import verify_kernel
    from proofs.wrapper import checked_premises

    name = target.function.rsplit(".", 1)[-1]
    path = root / target.source_file
    unknown = dict(kernel=name, key=target.key, source_file=target.source_file, source_digest=target.source_digest,
                   contract_file=str(contract_path(target.kernel, root).relative_to(root)),
                   configuration=dict(sorted(target.constexprs.items())), verdict="UNKNOWN")
    try:
        digest = file_digest(path)
    except OSError:
        return KernelResult(**unknown, reason=f"kernel source {target.source_file} is missing")
    if digest != target.source_digest:
        return KernelResult(**unknown, reason=f"{target.source_file} changed since the plan was sealed "
                            f"({digest} != {target.source_digest}): re-seal the plan")
    try:
        contract = load_contract(contract_path(target.kernel, root))
        src = load_kernel(path, name)
    except (ContractError, KernelSourceError) as exc:
        return KernelResult(**unknown, reason=str(exc))
    if contract.kernel != name:
        return KernelResult(**unknown, reason=f"contract {contract.path} is for {contract.kernel}, not {name}")
    result = verify_kernel(src, contract, target.constexprs, key=target.key, static=target.static,
                           timeout_ms=timeout_ms,
                           checked_premises=checked_premises(src, contract, target.constexprs, target.static))
    result.source_file = target.source_file
    result.contract_file = unknown["contract_file"]
    return result


def verify_targets(targets: Iterable[Target], *, progress: Callable[[str, int, int], None] | None = None,
                   root: Path = REPO_ROOT) -> list[KernelResult]:
    """Verify each target in order; ``progress(message, done, total)`` after each."""
    targets = list(targets)
    results = []
    for i, t in enumerate(targets):
        if progress:
            progress(f"verifying {t.key}", i, len(targets))
        results.append(verify_target(t, root=root))
    if progress:
        progress("verified", len(targets), len(targets))
    return results
