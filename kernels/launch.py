"""The active plan, launch admission and launch recording.

Every op in kernels/ops.py computes its configuration from static shapes, then calls
:func:`require`: the launch proceeds only if the active plan holds exactly that configuration,
and every admitted launch is appended to each open :func:`record_launches` list, so the engine
can emit runtime-config-check evidence of what actually ran. The CPU path goes through the
same admission as the Triton path.

Torch- and Triton-free.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Iterator, Mapping, NamedTuple

from kernels.configs import LaunchConfig
from kernels.plan import PlanEntry, SealedPlan

__all__ = ["PlanViolation", "LaunchRecord", "use_plan", "active_plan", "metadata_checks_enabled",
           "record_launches", "require"]


class PlanViolation(RuntimeError):
    """A launch was refused: no active plan, or its configuration is not in the active plan."""


class LaunchRecord(NamedTuple):
    """One admitted launch: kernel name, plan key and its full configuration."""

    kernel: str
    key: str
    config: Mapping[str, Any]  # constexprs plus num_warps and num_stages (read-only: records share it)


@dataclass(frozen=True, slots=True)
class _Active:
    plan: SealedPlan
    check_metadata: bool


_ACTIVE: ContextVar[_Active | None] = ContextVar("bitcase_active_plan", default=None)
_RECORDERS: ContextVar[tuple[list[LaunchRecord], ...]] = ContextVar("bitcase_launch_recorders", default=())


@contextmanager
def use_plan(plan: SealedPlan, *, check_metadata: bool = True) -> Iterator[SealedPlan]:
    """Make ``plan`` the active plan inside the block.

    ``check_metadata`` also validates index tensors (token ids, slots, block tables, query
    offsets) before each launch; on CUDA this reads them back to the host, so benchmarks and
    CUDA-graph capture turn it off.
    """
    if not isinstance(plan, SealedPlan):
        raise TypeError(f"use_plan needs a SealedPlan, got {type(plan).__name__}")
    token = _ACTIVE.set(_Active(plan, check_metadata))
    try:
        yield plan
    finally:
        _ACTIVE.reset(token)


def active_plan() -> SealedPlan | None:
    """The plan launches are admitted against, or None outside any ``use_plan`` block."""
    active = _ACTIVE.get()
    return None if active is None else active.plan


def metadata_checks_enabled() -> bool:
    """Whether the active ``use_plan`` asked for index-tensor validation."""
    active = _ACTIVE.get()
    return active is not None and active.check_metadata


@contextmanager
def record_launches() -> Iterator[list[LaunchRecord]]:
    """Collect every admitted launch inside the block, in launch order."""
    records: list[LaunchRecord] = []
    token = _RECORDERS.set(_RECORDERS.get() + (records,))
    try:
        yield records
    finally:
        _RECORDERS.reset(token)


_RECORDS: dict[int, tuple[PlanEntry, LaunchRecord]] = {}  # id(entry) -> its (immutable) record


def _record(entry: PlanEntry, config: LaunchConfig) -> LaunchRecord:
    known = _RECORDS.get(id(entry))
    if known is not None and known[0] is entry:
        return known[1]
    record = LaunchRecord(entry.kernel, entry.key, MappingProxyType(config.launch_options()))
    _RECORDS[id(entry)] = (entry, record)
    return record


def require(config: LaunchConfig) -> PlanEntry:
    """Admit a launch of ``config`` against the active plan and record it; refuse otherwise."""
    active = _ACTIVE.get()
    if active is None:
        raise PlanViolation(
            f"kernel launch refused: {config.kernel} {config.launch_options()} has no active plan; "
            "run it inside `with kernels.launch.use_plan(kernels.plan.plan_for(shape)):`")
    plan = active.plan
    entry = plan.admit(config)
    if entry is None:
        entry = plan.lookup(config.kernel, config.constexprs)
        planned = [e.key for e in plan.entries if e.kernel == config.kernel]
        detail = "" if entry is None else f" (planned entry {entry.key} differs: {entry.config()})"
        raise PlanViolation(
            f"kernel launch refused: {config.kernel} with config {config.launch_options()} "
            f"(static {config.static_dict()}) is not in the active plan {plan.name!r} "
            f"(digest {plan.digest}){detail}; planned {config.kernel} keys: {', '.join(planned) or 'none'}")
    recorders = _RECORDERS.get()
    if recorders:
        record = _record(entry, config)
        for records in recorders:
            records.append(record)
    return entry
