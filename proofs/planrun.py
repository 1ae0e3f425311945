"""Verify the entries of a sealed kernel plan, each against its contract in kernels/contracts/.

Targets come from a :class:`kernels.plan.SealedPlan` or from the ``kernel_plan.entries`` of a
deployment configuration D (so a plan sealed for a custom shape is verified as D names it).
The kernel source is read from the file the entry names and must still have the digest the
entry sealed; otherwise the result is UNKNOWN (the proof would be about other code).
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, cast

from evidence_db.canonical import file_digest
from proofs.contract import load_contract
from proofs.errors import ContractError, KernelSourceError
from proofs.result import KernelResult
from proofs.source import load_kernel

__all__ = ["Target", "targets_from_plan", "targets_from_deployment", "contract_path", "verify_target",
           "verify_targets", "default_jobs", "REPO_ROOT"]

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


# Worker processes of verify_targets when neither the caller nor BITCASE_VERIFY_JOBS says: Z3 runs
# one proof per process, and past a few workers a plan's slowest entry sets the time.
MAX_DEFAULT_JOBS = 4


def default_jobs() -> int:
    """Worker processes for :func:`verify_targets`: ``BITCASE_VERIFY_JOBS``, else the CPUs, at most MAX_DEFAULT_JOBS."""
    raw = os.environ.get("BITCASE_VERIFY_JOBS", "").strip()
    if not raw:
        return max(1, min(os.cpu_count() or 1, MAX_DEFAULT_JOBS))
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"BITCASE_VERIFY_JOBS must be a positive integer (worker processes), got {raw!r}")
    return int(raw)


def _longest_first(target: Target) -> tuple[int, str]:
    """Attention entries first: their proofs take seconds where the others take fractions of one,
    so started last they would leave one worker running alone at the end."""
    return (0 if "attention" in target.kernel else 1, target.key)


def verify_targets(targets: Iterable[Target], *, progress: Callable[[str, int, int], None] | None = None,
                   root: Path = REPO_ROOT, jobs: int = 1) -> list[KernelResult]:
    """Verify each target, in ``jobs`` worker processes when more than one; results in the targets'
    order. ``progress(message, done, total)`` after each."""
    targets = list(targets)
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    results: list[KernelResult | None] = [None] * len(targets)
    if jobs == 1 or len(targets) < 2:
        for i, t in enumerate(targets):
            if progress:
                progress(f"verifying {t.key}", i, len(targets))
            results[i] = verify_target(t, root=root)
    else:
        # spawn: a forked child of a process that has loaded torch or started threads may deadlock
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(jobs, len(targets)), mp_context=context) as pool:
            order = sorted(range(len(targets)), key=lambda i: _longest_first(targets[i]))
            futures = {pool.submit(verify_target, targets[i], root=root): i for i in order}
            if progress:
                progress(f"verifying {len(targets)} entries in {min(jobs, len(targets))} processes", 0, len(targets))
            for done, future in enumerate(as_completed(futures), start=1):
                i = futures[future]
                results[i] = future.result()
                if progress:
                    progress(f"verified {targets[i].key}", done, len(targets))
    if progress:
        progress("verified", len(targets), len(targets))
    return cast(list[KernelResult], results)
