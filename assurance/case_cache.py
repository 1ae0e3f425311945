"""A cache of validated, expanded cases, so a 10,000-node case is not re-parsed on every command.

Keyed by the digest of the case file's bytes, the plan entries it was expanded over, and the source
of the modules that parse, validate and expand cases: any change to one of them is a miss. Entries
are plain JSON (never pickle) under the cache directory; an unreadable or unwritable cache is
simply skipped.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from assurance.case_model import Case, Component, Contract, Generator, Node
from assurance.generators import PlanItem
from assurance.ids import NodeId
from evidence_db.canonical import digest_of, file_digest

__all__ = ["cache_key", "load_cached", "store_cached", "SCHEMA_ID"]

SCHEMA_ID = "bitcase.case-cache/v4"  # v2: the case root; v3: its deployment pin; v4: components
_CODE = ("case_loader.py", "case_model.py", "case_components.py", "validate.py", "generators.py", "ids.py",
         "case_cache.py")
_TUPLE_FIELDS = ("supported_by", "in_context_of", "obligations", "requires", "any_of", "subjects", "components")


@lru_cache(maxsize=1)
def _code_digest() -> str:
    here = Path(__file__).resolve().parent
    return digest_of({name: file_digest(here / name) for name in _CODE})


def cache_key(path: Path, items: Iterable[PlanItem] | None) -> str:
    """The key of ``path`` expanded over ``items`` (``None``: not expanded)."""
    plan = None if items is None else [asdict(i) for i in items]
    return digest_of({"case": file_digest(path), "plan": plan, "code": _code_digest()})


def _file(cache_dir: Path, key: str) -> Path:
    return cache_dir / f"case-{key.split(':', 1)[1][:32]}.json"


def _node(d: dict[str, Any]) -> Node:
    fields = dict(d)
    for name in _TUPLE_FIELDS:
        fields[name] = tuple(fields[name])
    for name in ("when", "when_not"):
        fields[name] = tuple((field, tuple(values)) for field, values in fields[name])
    fields["id"] = NodeId(fields["id"])
    return Node(**fields)


def load_cached(cache_dir: Path | None, key: str, path: Path) -> Case | None:
    """The cached case for ``key`` (with ``path`` attached), or ``None``."""
    if cache_dir is None:
        return None
    try:
        doc = json.loads(_file(cache_dir, key).read_text(encoding="utf-8"))
        if doc.get("schema") != SCHEMA_ID or doc.get("key") != key:
            return None
        c = doc["case"]
        generators = tuple(Generator(id=g["id"], parent=NodeId(g["parent"]), template=g["template"],
                                     for_each=g["for_each"], match=tuple(g["match"]), exclude=tuple(g["exclude"]),
                                     line=g["line"]) for g in c["generators"])
        return Case(id=c["id"], title=c["title"], top=NodeId(c["top"]), nodes=tuple(_node(n) for n in c["nodes"]),
                    generators=generators, document=c["document"], path=path, is_expanded=c["is_expanded"],
                    plan_label=c["plan_label"], root=c["root"], deployment=c["deployment"],
                    components=tuple(Component(**x) for x in c["components"]),
                    contracts=tuple(Contract(**x) for x in c["contracts"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store_cached(cache_dir: Path | None, key: str, case: Case) -> None:
    """Write ``case`` under ``key`` atomically; failures are ignored (the cache is an optimisation)."""
    if cache_dir is None:
        return
    doc = {"schema": SCHEMA_ID, "key": key, "case": {
        "id": case.id, "title": case.title, "top": case.top, "document": case.document,
        "is_expanded": case.is_expanded, "plan_label": case.plan_label, "root": case.root,
        "deployment": case.deployment,
        "nodes": [asdict(n) for n in case.nodes],
        "components": [asdict(x) for x in case.components], "contracts": [asdict(x) for x in case.contracts],
        "generators": [{"id": g.id, "parent": g.parent, "template": dict(g.template), "for_each": g.for_each,
                        "match": list(g.match), "exclude": list(g.exclude), "line": g.line} for g in case.generators],
    }}
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".case-", dir=cache_dir)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False)
        os.replace(tmp, _file(cache_dir, key))
    except OSError:
        return
