"""Turning one parsed bundle record into what the store appends: validated, with its digests.

Every input path (bundle lines, JSON arrays, JUnit test cases, :class:`EvidenceRecord`
objects handed to :func:`evidence_db.store.ingest_records`) goes through a :class:`Preparer`,
so the same schema, limits and digests apply to all of them. A preparer lives for one ingest
and remembers what repeats between records (producers, deployment configurations), which is
most of the work for large bundles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evidence_db.canonical import canonical_json
from evidence_db.chain import (content_digest_of_text, deployment_json, evidence_content_json, producer_json,
                               subjects_json)
from evidence_db.errors import BundleError
from evidence_db.validate import SchemaViolation, evidence_part_checks, json_type_name

__all__ = ["PreparedRecord", "Preparer", "check_json_value", "MAX_DEPTH", "MAX_ABS_INT"]

MAX_DEPTH = 64  # nesting of objects/arrays inside details and deployment fields
MAX_ABS_INT = 2**63 - 1  # what every SQL engine and JSON reader handles exactly


@dataclass(slots=True)
class PreparedRecord:
    """A validated record with the canonical JSON parts and digests the store needs."""

    where: str  # "bundle.jsonl:12", for error messages
    record_id: str
    schema_id: str
    category: str
    obligation: str
    status: str
    summary: str
    produced_at: str
    producer: dict[str, str]
    producer_json: str
    deployment_fields: dict[str, Any]
    deployment_digest: str
    subjects: list[tuple[str, str]]
    details: dict[str, Any]
    details_json: str
    content_digest: str


def _is_plain_json(value: Any, depth: int) -> bool:
    """Fast check: only exact JSON types, finite floats, 64-bit ints, bounded depth."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return -MAX_ABS_INT <= value <= MAX_ABS_INT
    if kind is float:
        return value - value == 0.0  # false for NaN and ±inf
    if depth >= MAX_DEPTH:
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not _is_plain_json(item, depth + 1):
                return False
        return True
    if kind is list:
        for item in value:
            if not _is_plain_json(item, depth + 1):
                return False
        return True
    return False


def check_json_value(value: Any, path: str) -> None:
    """Reject values without an exact, portable JSON form: NaN/Infinity, huge ints, deep nesting.

    Raises :class:`SchemaViolation` naming the offending element's path.
    """
    if _is_plain_json(value, 0):
        return
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:  # slow path, only to name what is wrong (iterative: depth cannot exhaust the stack)
        item, where, depth = stack.pop()
        if isinstance(item, (bool, str)) or item is None:
            continue
        if isinstance(item, int):
            if abs(item) > MAX_ABS_INT:
                raise SchemaViolation(where, f"integer {str(item)[:30]}… is out of range",
                                      "integers must fit in 64 bits; write big values as strings")
        elif isinstance(item, float):
            if item - item != 0.0:
                raise SchemaViolation(where, f"{item} is not a finite number",
                                      "JSON has no NaN or Infinity; use null or a string")
        elif isinstance(item, (dict, list)):
            if depth >= MAX_DEPTH:
                raise SchemaViolation(where, f"is nested more than {MAX_DEPTH} levels deep", "flatten the structure")
            if isinstance(item, list):
                stack.extend((sub, f"{where}[{i}]", depth + 1) for i, sub in enumerate(item))
                continue
            for key, sub in item.items():
                if not isinstance(key, str):
                    raise SchemaViolation(where, f"has a non-string key {key!r}", "object keys must be strings")
                stack.append((sub, f"{where}.{key}", depth + 1))
        else:
            raise SchemaViolation(where, f"a {type(item).__name__} is not a JSON value",
                                  "use strings, numbers, booleans, null, lists and objects")


class Preparer:
    """Validates records and computes their digests, for one ingest."""

    def __init__(self) -> None:
        self._producers: dict[tuple[tuple[str, str], ...], str] = {}  # producer items -> canonical JSON
        self._deployments: dict[str, tuple[dict[str, Any], str]] = {}  # digest -> (fields, deployment JSON)
        self._last_deployment: Any = object()  # the last deployment object that passed every check
        self._last_producer: tuple[Any, str] = (object(), "")  # the last valid producer object, its JSON

    def __call__(self, record: Any, where: str) -> PreparedRecord:
        """Validate one parsed record and compute its digests; raise :class:`BundleError`.

        Optional fields take their defaults (``subjects: []``, ``details: {}``) before hashing,
        so the content digest equals :meth:`EvidenceRecord.content_digest` of the record.
        """
        if not isinstance(record, dict):
            raise BundleError(f"expected a JSON object (one evidence record), got {json_type_name(record)}",
                              where=where, hint="each line of a .jsonl bundle (or each element of a .json array) "
                                                "is one record object")
        record_id = record.get("id")
        if isinstance(record_id, str) and record_id:
            where = f"{where} (id {record_id[:80]!r})"
        try:
            return self._prepare(record, where)
        except SchemaViolation as exc:
            raise BundleError(exc.message, where=where, field=exc.path, hint=exc.hint) from None
        except UnicodeEncodeError:
            raise BundleError("a string contains an unpaired UTF-16 surrogate (a \\ud800-\\udfff escape)",
                              where=where, hint="encode text as valid Unicode; escape binary data") from None

    def _prepare(self, record: dict[str, Any], where: str) -> PreparedRecord:
        check_shell, check_producer, check_deployment = evidence_part_checks()
        check_shell(record, ())
        producer = record["producer"]
        if producer is self._last_producer[0]:  # bundle lines share one parsed object when repeated
            prod_json = self._last_producer[1]
        else:
            is_strings = isinstance(producer, dict) and all(type(v) is str for v in producer.values())
            prod_json = self._producers.get(tuple(producer.items())) if is_strings else None
            if prod_json is None:  # a producer not seen yet in this ingest
                check_producer(producer, ("producer",))
                prod_json = self._producers[tuple(producer.items())] = producer_json(producer)
            self._last_producer = (producer, prod_json)
        deployment = record["deployment"]
        if deployment is not self._last_deployment:  # bundle lines share one parsed object when repeated
            check_deployment(deployment, ("deployment",))
        fields, deployment_digest = deployment["fields"], deployment["digest"]
        dep_json = self._deployment_json(fields, deployment_digest)
        self._last_deployment = deployment
        details = record.get("details", {})
        check_json_value(details, "details")
        details_json = canonical_json(details)
        subjects = [(s["uri"], s["sha256"]) for s in record.get("subjects", ())]
        content = evidence_content_json(
            schema_id=record["schema"], record_id=record["id"], category=record["category"],
            obligation=record["obligation"], status=record["status"], summary=record["summary"],
            produced_at=record["produced_at"], producer=prod_json,
            deployment=dep_json, subjects=subjects_json(subjects),
            details=details_json)
        return PreparedRecord(
            where=where, record_id=record["id"], schema_id=record["schema"], category=record["category"],
            obligation=record["obligation"], status=record["status"], summary=record["summary"],
            produced_at=record["produced_at"], producer=producer, producer_json=prod_json, deployment_fields=fields,
            deployment_digest=deployment_digest, subjects=subjects, details=details, details_json=details_json,
            content_digest=content_digest_of_text(content))

    def _deployment_json(self, fields: dict[str, Any], digest: str) -> str:
        """Canonical JSON of the deployment object, its fields checked against the digest once per value."""
        cached = self._deployments.get(digest)
        if cached is not None and cached[0] is fields:
            return cached[1]
        if cached is not None:
            try:
                text = deployment_json(canonical_json(fields), digest)
            except (ValueError, TypeError, RecursionError):
                text = None
            if text == cached[1]:  # same text as a value already checked: same value
                return text
        check_json_value(fields, "deployment.fields")
        fields_json = canonical_json(fields)
        actual = content_digest_of_text(fields_json)
        if actual != digest:
            raise SchemaViolation("deployment.digest", f"{digest} does not match the fields (their digest is "
                                  f"{actual})", "write the digest evidence_db.canonical.digest_of(fields) "
                                  "computes (bundle.Deployment fills it in)")
        text = deployment_json(fields_json, digest)
        if cached is None:
            self._deployments[digest] = (fields, text)
        return text
