"""Turning one parsed bundle record into what the store appends: validated, with its digests.

Every input path (bundle lines, JSON arrays, JUnit test cases, :class:`EvidenceRecord`
objects handed to :func:`evidence_db.store.ingest_records`) goes through a :class:`Preparer`,
so the same schema, limits and digests apply to all of them. A preparer lives for one ingest
and remembers what repeats between records (producers, deployment configurations), which is
most of the work for large bundles.
"""

from __future__ import annotations

from sys import intern
from typing import Any, NamedTuple

from evidence_db.bundle import SCHEMA_VERSIONS
from evidence_db.canonical import canonical_json_of_tree, encoder_for_version
from evidence_db.chain import ContentHasher, content_digest_of_text, deployment_json, producer_json, subjects_json
from evidence_db.errors import BundleError
from evidence_db.jcs import MAX_SAFE_INT
from evidence_db.validate import SchemaViolation, evidence_part_checks, json_type_name, schema_for

__all__ = ["PreparedRecord", "CheckedRecord", "Preparer", "check_json_value", "MAX_DEPTH", "MAX_ABS_INT"]

MAX_DEPTH = 64  # nesting of objects/arrays inside details and deployment fields
MAX_ABS_INT = 2**63 - 1  # v1: what every SQL engine handles exactly
MAX_ABS_INT_BY_VERSION = {1: MAX_ABS_INT, 2: MAX_SAFE_INT}  # v2 (RFC 8785): exact in every JSON reader
MAX_REMEMBERED_OBJECTS = 64  # valid producer or deployment objects remembered by identity


class PreparedRecord(NamedTuple):
    """A validated record with the canonical JSON parts and digests the store needs.

    A tuple, so that batches of them cross a pipe cheaply (see ``evidence_db.pipeline``).
    """

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
    details_json: str
    content_digest: str


class CheckedRecord(NamedTuple):
    """A record halfway through :class:`Preparer`: everything checked and encoded, no content digest yet.

    What the ingest worker sends (``evidence_db.pipeline``); :meth:`Preparer.finish` completes it.
    """

    where: str
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
    deployment_json: str
    subjects: list[tuple[str, str]]
    details_json: str


def _is_plain_json(value: Any, depth: int, max_abs_int: int = MAX_SAFE_INT) -> bool:
    """Fast check: only exact JSON types, finite floats, bounded ints, bounded depth."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return -max_abs_int <= value <= max_abs_int
    if kind is float:
        return value - value == 0.0  # false for NaN and ±inf
    if depth >= MAX_DEPTH:
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not _is_plain_json(item, depth + 1, max_abs_int):
                return False
        return True
    if kind is list:
        for item in value:
            if not _is_plain_json(item, depth + 1, max_abs_int):
                return False
        return True
    return False


def check_json_value(value: Any, path: str, version: int = 2) -> None:
    """Reject values without an exact, portable JSON form: NaN/Infinity, huge ints, deep nesting.

    ``version`` is the record's schema version: v2 integers must be exact doubles (RFC 8785),
    v1 integers 64-bit. Raises :class:`SchemaViolation` naming the offending element's path.
    """
    max_abs_int = MAX_ABS_INT_BY_VERSION[version]
    if _is_plain_json(value, 0, max_abs_int):
        return
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:  # slow path, only to name what is wrong (iterative: depth cannot exhaust the stack)
        item, where, depth = stack.pop()
        if isinstance(item, (bool, str)) or item is None:
            continue
        if isinstance(item, int):
            if abs(item) > max_abs_int:
                limit = "fit in 64 bits" if version == 1 else "lie within ±(2**53 - 1) (RFC 8785)"
                raise SchemaViolation(where, f"integer {str(item)[:30]}… is out of range",
                                      f"integers must {limit}; write big values as strings")
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
        # (schema version, digest) -> (fields, deployment JSON)
        self._deployments: dict[tuple[int, str], tuple[dict[str, Any], str]] = {}
        # Parsed objects that passed every check, by identity (the line parser shares repeated
        # ones): id -> (the object, kept alive so its id stays its own; its canonical JSON).
        self._valid_producers: dict[int, tuple[Any, str]] = {}
        self._valid_deployments: dict[tuple[int, int], tuple[Any, str]] = {}  # key (version, id)
        self._hasher = ContentHasher()

    def __call__(self, record: Any, where: str) -> PreparedRecord:
        """Validate one parsed record and compute its digests; raise :class:`BundleError`.

        Optional fields take their defaults (``subjects: []``, ``details: {}``) before hashing,
        so the content digest equals :meth:`EvidenceRecord.content_digest` of the record.
        """
        return self.finish(self.check(record, where))

    def check(self, record: Any, where: str) -> CheckedRecord:
        """The first half of :meth:`__call__`: everything but the content digest."""
        if not isinstance(record, dict):
            raise BundleError(f"expected a JSON object (one evidence record), got {json_type_name(record)}",
                              where=where, hint="each line of a .jsonl bundle (or each element of a .json array) "
                                                "is one record object")
        record_id = record.get("id")
        if isinstance(record_id, str) and record_id:
            where = f"{where} (id {record_id[:80]!r})"
        try:
            return self._check(record, where)
        except (SchemaViolation, UnicodeEncodeError) as exc:
            raise _input_error(exc, where) from None

    def finish(self, checked: CheckedRecord) -> PreparedRecord:
        """The second half of :meth:`__call__`: the content digest (it finds unpaired surrogates)."""
        try:
            return self._finish(checked)
        except UnicodeEncodeError as exc:
            raise _input_error(exc, checked.where) from None

    def _check(self, record: dict[str, Any], where: str) -> CheckedRecord:
        schema_id = schema_for(record)
        check_shell, check_producer, check_deployment = evidence_part_checks(schema_id)
        check_shell(record, ())
        version = SCHEMA_VERSIONS[schema_id]
        producer = record["producer"]
        known = self._valid_producers.get(id(producer))
        if known is not None and known[0] is producer:  # bundle lines share one parsed object when repeated
            prod_json = known[1]
        else:
            is_strings = isinstance(producer, dict) and all(type(v) is str for v in producer.values())
            prod_json = self._producers.get(tuple(producer.items())) if is_strings else None
            if prod_json is None:  # a producer not seen yet in this ingest
                check_producer(producer, ("producer",))
                prod_json = self._producers[tuple(producer.items())] = producer_json(producer)
            _remember(self._valid_producers, producer, prod_json)
        # A producer's canonical JSON is the same under both versions (strings only); a deployment's is not.
        deployment = record["deployment"]
        known = self._valid_deployments.get((version, id(deployment)))
        if known is not None and known[0] is deployment:
            dep_json = known[1]
        else:
            check_deployment(deployment, ("deployment",))
            dep_json = self._deployment_json(deployment["fields"], deployment["digest"], version)
            _remember(self._valid_deployments, deployment, dep_json, key=(version, id(deployment)))
        # Values that repeat between records become one object each, so a batch sent to the
        # inserting process (evidence_db.pipeline) carries each of them once.
        subjects = [(_shared(s["uri"]), _shared(s["sha256"])) for s in record.get("subjects", ())]
        details = record.get("details", {})
        check_json_value(details, "details", version)
        return CheckedRecord(
            where, record["id"], _shared(record["schema"]), _shared(record["category"]), _shared(record["obligation"]),
            _shared(record["status"]), record["summary"], _shared(record["produced_at"]), producer, prod_json,
            deployment["fields"], deployment["digest"], dep_json, subjects, canonical_json_of_tree(details, version))

    def _finish(self, checked: CheckedRecord) -> PreparedRecord:
        (where, record_id, schema_id, category, obligation, status, summary, produced_at, producer, prod_json,
         fields, deployment_digest, dep_json, subjects, details_json) = checked
        content_digest = self._hasher.digest(
            schema_id=schema_id, record_id=record_id, category=category, obligation=obligation, status=status,
            summary=summary, produced_at=produced_at, producer=prod_json, deployment=dep_json,
            subjects=subjects_json(subjects), details=details_json)
        return PreparedRecord(
            where=where, record_id=record_id, schema_id=schema_id, category=category, obligation=obligation,
            status=status, summary=summary, produced_at=produced_at, producer=producer, producer_json=prod_json,
            deployment_fields=fields, deployment_digest=deployment_digest, subjects=subjects,
            details_json=details_json, content_digest=content_digest)

    def _deployment_json(self, fields: dict[str, Any], digest: str, version: int) -> str:
        """Canonical JSON of the deployment object, its fields checked against the digest once per value."""
        encode = encoder_for_version(version)
        cached = self._deployments.get((version, digest))
        if cached is not None and cached[0] is fields:
            return cached[1]
        if cached is not None:
            try:
                text = deployment_json(encode(fields), digest)
            except (ValueError, TypeError, RecursionError):
                text = None
            if text == cached[1]:  # same text as a value already checked: same value
                return text
        check_json_value(fields, "deployment.fields", version)
        fields_json = encode(fields)
        actual = content_digest_of_text(fields_json)
        if actual != digest:
            rule = "evidence_db.canonical.digest_of(fields)" if version == 2 else "the v1 rule (digest_of_v1)"
            raise SchemaViolation("deployment.digest", f"{digest} does not match the fields (their digest is "
                                  f"{actual})", f"write the digest {rule} computes (bundle.Deployment fills "
                                  "it in)")
        text = deployment_json(fields_json, digest)
        if cached is None:
            self._deployments[(version, digest)] = (fields, text)
        return text


def _shared(text: str) -> str:
    """One object for equal strings (``sys.intern``; a str subclass is kept as it is)."""
    return intern(text) if type(text) is str else text


def _input_error(exc: SchemaViolation | UnicodeEncodeError, where: str) -> BundleError:
    if isinstance(exc, SchemaViolation):
        return BundleError(exc.message, where=where, field=exc.path, hint=exc.hint)
    return BundleError("a string contains an unpaired UTF-16 surrogate (a \\ud800-\\udfff escape)",
                       where=where, hint="encode text as valid Unicode; escape binary data")


def _remember(known: dict[Any, tuple[Any, str]], value: Any, text: str, key: Any = None) -> None:
    if len(known) >= MAX_REMEMBERED_OBJECTS:
        known.clear()
    known[id(value) if key is None else key] = (value, text)
