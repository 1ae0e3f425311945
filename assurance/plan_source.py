"""Where generated nodes come from: the sealed kernel plan of a deployment configuration.

The plan D names is preferred (its entries when D records them, else the preset it names);
``--plan PRESET`` picks one explicitly. ``kernels.plan`` is imported lazily so the CLI's help
and the case tools never pay for it.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from assurance.cli._common import BitcaseError
from assurance.generators import PlanItem
from evidence_db.canonical import digest_of

__all__ = ["items_from_entries", "preset_items", "items_for_deployment", "PlanUnavailable"]

_PLAN_FIELDS = ("plan", "kernel_plan", "sealed_plan")


class PlanUnavailable(BitcaseError):
    """No sealed plan could be found; the message says why (a user error: exit code 2)."""


def items_from_entries(entries: Iterable[Any]) -> tuple[PlanItem, ...]:
    """Plan items from ``kernels.plan.PlanEntry`` objects or their ``as_dict()`` form."""
    items = []
    for entry in entries:
        if isinstance(entry, Mapping):
            digest = str(entry.get("digest") or digest_of(dict(entry)))
            items.append(PlanItem(kernel=str(entry["kernel"]), key=str(entry["key"]),
                                  source_file=str(entry["source_file"]), digest=digest))
        else:
            items.append(PlanItem(kernel=entry.kernel, key=entry.key, source_file=entry.source_file,
                                  digest=entry.digest))
    return tuple(sorted(items, key=lambda i: i.key))


def preset_items(name: str) -> tuple[PlanItem, ...]:
    """Plan items of the preset shape ``name`` (raises :class:`PlanUnavailable` with the reason)."""
    try:
        from kernels.plan import preset_plan
    except ImportError as exc:
        raise PlanUnavailable(f"the kernel plan module cannot be imported ({exc})") from None
    try:
        return items_from_entries(preset_plan(name).entries)
    except (ValueError, KeyError, FileNotFoundError) as exc:
        raise PlanUnavailable(f"cannot build the sealed plan of preset {name!r}: {exc}") from None


def items_for_deployment(fields: Mapping[str, Any] | None) -> tuple[tuple[PlanItem, ...], str]:
    """The plan items of D and a label saying where they came from.

    Looks for a plan table in D (``plan``/``kernel_plan``/``sealed_plan``): its ``entries`` when
    recorded, else its ``name`` as a preset. Raises :class:`PlanUnavailable` when D names none.
    """
    if not fields:
        raise PlanUnavailable("no deployment configuration to take the sealed plan from")
    for key in _PLAN_FIELDS:
        plan = fields.get(key)
        if isinstance(plan, Mapping):
            label = str(plan.get("name") or plan.get("digest") or key)
            entries = plan.get("entries")
            if isinstance(entries, list) and entries:
                try:
                    return items_from_entries(entries), f"plan {label} recorded in D"
                except (KeyError, TypeError, ValueError) as exc:
                    raise PlanUnavailable(f"D's plan entries are not readable: {exc}") from None
            if plan.get("name"):
                return preset_items(str(plan["name"])), f"preset plan {plan['name']} named by D"
        elif isinstance(plan, str) and plan and not plan.startswith("sha256:"):
            return preset_items(plan), f"preset plan {plan} named by D"
    raise PlanUnavailable("D records no sealed plan entries or plan name; pass --plan PRESET")
