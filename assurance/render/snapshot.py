"""A comparable snapshot of an assurance case: claim statuses, evidence and the trusted base.

``bitcase audit diff`` compares two snapshots taken from either a store (evaluated with a
case) or a JSON file written by ``bitcase export --format json`` (the status engine's
``bitcase.status/v1`` object, a list of them, or an object holding them under
``evaluations``). Snapshots hold ids, statuses, digests and the reviews of trusted items.

An export knows less than a store: only the D it was evaluated under, and only the evidence
its nodes cite. Both kinds of snapshot therefore record which evidence the evaluated nodes
cite under each D (``cited``), so :func:`~assurance.render.diff.diff_snapshots` can compare a
store with an export on what both know.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from assurance.cli._common import BitcaseError

__all__ = ["Snapshot", "snapshot_from_json", "snapshot_from_state", "load_snapshot", "is_json_snapshot"]

_TRUSTED = ("trusted-reviewed", "trusted-unreviewed")
REVIEW_FIELDS = ("state", "decision", "reviewer", "rationale", "created_at")  # what a diff shows of a review
_MAX_JSON_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class Snapshot:
    """``claims`` maps (D digest, node id) to (kind, status); ``evidence`` maps item id to digest.

    ``cited`` maps each D to the evidence ids its evaluated nodes cite; ``reviews`` maps
    (D digest, trusted node id) to its review (:data:`REVIEW_FIELDS`). ``is_export``: the
    snapshot holds only the D's it names and, unless ``has_all_evidence``, only cited evidence.
    """

    source: str
    claims: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    evidence: dict[str, str] = field(default_factory=dict)
    trusted_base: frozenset[tuple[str, str]] = frozenset()
    cited: dict[str, frozenset[str]] = field(default_factory=dict)
    reviews: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    is_export: bool = False
    has_all_evidence: bool = True

    @property
    def deployments(self) -> set[str]:
        """The D digests the snapshot evaluated the case under."""
        return {d for d, _ in self.claims}


def _review(review: dict[str, Any] | None) -> dict[str, Any] | None:
    return {k: review.get(k) for k in REVIEW_FIELDS} if isinstance(review, dict) else None


def _trusted_base(nodes: list[dict[str, Any]], tops: Iterable[str]) -> set[str]:
    by_id = {n["id"]: n for n in nodes}
    seen, stack = set(), [t for t in tops if t in by_id]
    while stack:
        node_id = stack.pop()
        if node_id in seen:
            continue
        seen.add(node_id)
        stack.extend(c for c in by_id[node_id].get("supported_by", ()) if c in by_id)
    return {i for i in seen if by_id[i].get("trusted") and by_id[i].get("status") in _TRUSTED}


def _evaluations(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, list):
        return value
    if isinstance(value, dict) and isinstance(value.get("evaluations"), list):
        return value["evaluations"]
    if isinstance(value, dict) and "nodes" in value:
        return [value]
    raise ValueError("expected a bitcase.status/v1 object, a list of them, or {\"evaluations\": [...]}")


def snapshot_from_json(value: Any, *, source: str) -> Snapshot:
    """A snapshot of exported JSON; raises BitcaseError naming what is missing."""
    try:
        claims: dict[tuple[str, str], tuple[str, str]] = {}
        evidence: dict[str, str] = {}
        base: set[tuple[str, str]] = set()
        cited: dict[str, set[str]] = {}
        reviews: dict[tuple[str, str], dict[str, Any]] = {}
        for ev in _evaluations(value):
            digest = str(ev.get("deployment_digest", ""))
            nodes = ev["nodes"]
            for node in nodes:
                key = (digest, str(node["id"]))
                claims[key] = (str(node.get("kind", "")), str(node.get("status", "")))
                for field_name in ("evidence_ids", "stale_evidence_ids"):
                    for item_id in node.get(field_name, ()):
                        evidence.setdefault(str(item_id), "")
                        cited.setdefault(digest, set()).add(str(item_id))
                if (review := _review(node.get("review"))) is not None:
                    reviews[key] = review
            tops = [t["id"] if isinstance(t, dict) else t for t in ev.get("tops", ())]
            base.update((digest, i) for i in _trusted_base(nodes, tops))
        items = value.get("evidence_items") if isinstance(value, dict) else None
        for item in items if isinstance(items, list) else ():
            evidence[str(item["id"])] = str(item.get("content_digest", ""))
    except (KeyError, TypeError, ValueError) as exc:
        raise BitcaseError(f"{source}: not an exported case snapshot ({exc})",
                           hint="pass a store (URL or SQLite file) or the output of `bitcase export --format json`")
    return Snapshot(source, claims, evidence, frozenset(base), {d: frozenset(i) for d, i in cited.items()}, reviews,
                    is_export=True, has_all_evidence=isinstance(items, list))


def snapshot_from_state(state: Any, *, source: str) -> Snapshot:
    """A snapshot of a case evaluated against a store (a :class:`~assurance.render.loading.StoreState`)."""
    from assurance.trusted import trusted_base

    claims: dict[tuple[str, str], tuple[str, str]] = {}
    base: set[tuple[str, str]] = set()
    cited: dict[str, frozenset[str]] = {}
    reviews: dict[tuple[str, str], dict[str, Any]] = {}
    for scope in state.scopes:
        evaluation = scope.evaluation
        digest = evaluation.deployment_digest
        ids: set[str] = set()
        for node_id, result in evaluation.nodes.items():
            claims[(digest, str(node_id))] = (result.kind, result.status)
            ids.update(result.evidence_ids, result.stale_evidence_ids)
            if result.review is not None:
                reviews[(digest, str(node_id))] = _review(result.review.to_json())
        cited[digest] = frozenset(ids)
        for top in evaluation.tops:
            base.update((digest, str(r.id)) for r in trusted_base(evaluation, top))
    evidence = {e.item_id: e.content_digest for e in state.evidence}
    return Snapshot(source, claims, evidence, frozenset(base), cited, reviews)


def is_json_snapshot(path: Path) -> bool:
    """Whether ``path`` is a JSON file (by suffix, else by its first non-blank byte)."""
    if path.suffix.lower() == ".json":
        return True
    with open(path, "rb") as f:
        head = f.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head[:1] in (b"{", b"[")


def load_snapshot(ref: str, *, case_path: Path | None, plan: str | None = None) -> Snapshot:
    """The snapshot behind ``ref``: a JSON export, a SQLite file, or a database URL.

    A store is evaluated with the case at ``case_path`` (default: as ``bitcase status`` picks it).
    """
    from assurance.cli._case_options import resolve_case_path
    from assurance.render.loading import load_state

    path = Path(ref)
    if "://" not in ref and not path.exists():
        raise BitcaseError(f"{ref}: no such file", hint="pass a store URL, a SQLite file or an exported JSON file")
    if "://" not in ref and path.is_file() and is_json_snapshot(path):
        if path.stat().st_size > _MAX_JSON_BYTES:
            raise BitcaseError(f"{ref}: JSON snapshot is larger than {_MAX_JSON_BYTES} bytes")
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise BitcaseError(f"{ref}: not valid JSON ({exc})",
                               hint="pass the output of `bitcase export --format json`") from None
        return snapshot_from_json(value, source=ref)
    state = load_state(db=ref, case_path=resolve_case_path(case_path, ref), plan=plan, pinned=False)
    return snapshot_from_state(state, source=ref)
