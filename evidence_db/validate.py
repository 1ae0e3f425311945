"""A small JSON Schema validator for the bundle schema, compiled once into closures.

It implements the keywords ``evidence_db/schema/evidence-v2.json`` (and v1) use (type, const, enum,
required, properties, additionalProperties: false, items, maxItems, minLength, maxLength,
pattern, format: date-time, local ``$ref``) and refuses a schema that uses any other, so the
shipped schema and the checks applied can never silently differ. Each schema node compiles
to one closure taking only the value; the path of a field is collected while a failure
propagates out of the nested closures, so nothing is spent on paths while values are valid,
which keeps validation cheap enough for 100,000-record bundles.
"""

from __future__ import annotations

import difflib
import json
import re
from datetime import datetime
from functools import lru_cache
from importlib import resources
from typing import Any, Callable

__all__ = ["SchemaViolation", "compile_schema", "json_type_name", "format_path", "evidence_schema",
           "validate_evidence", "evidence_part_checks", "schema_for", "CURRENT_SCHEMA"]

Path = tuple[str | int, ...]
Check = Callable[[Any, Path], None]
_Inner = Callable[[Any], None]  # a compiled node: raises _Failure
_MISSING = object()

SUPPORTED = {"type", "const", "enum", "required", "properties", "additionalProperties", "items", "maxItems",
             "minLength", "maxLength", "pattern", "format", "$ref"}
ANNOTATIONS = {"$schema", "$id", "$defs", "title", "description"}
MAX_REMEMBERED = 4096  # valid strings remembered per schema node
PY_TYPES: dict[str, tuple[type, ...]] = {"object": (dict,), "array": (list,), "string": (str,), "integer": (int,),
                                         "number": (int, float), "boolean": (bool,), "null": (type(None),)}


def json_type_name(value: Any) -> str:
    """The JSON name of a Python value's type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    for name in ("integer", "number", "string", "array", "object"):
        if isinstance(value, PY_TYPES[name]):
            return name
    return type(value).__name__


def format_path(path: Path) -> str:
    """``("producer", "version")`` → ``producer.version``; ``("subjects", 0, "uri")`` → ``subjects[0].uri``."""
    text = ""
    for key in path:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else key)
    return text


class SchemaViolation(Exception):
    """A value that does not match the schema: where (dotted path), what, and how to fix it."""

    def __init__(self, path: Path | str, message: str, hint: str) -> None:
        self.path = path if isinstance(path, str) else format_path(path)
        super().__init__(f"{self.path or '<record>'}: {message}")
        self.message = message
        self.hint = hint


class _Failure(Exception):
    """A violation inside the compiled closures; ``parts`` is the path, innermost key first."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.parts: list[str | int] = []
        self.message, self.hint = message, hint

    def violation(self, path: Path) -> SchemaViolation:
        return SchemaViolation((*path, *reversed(self.parts)), self.message, self.hint)


def _show(value: Any, limit: int = 60) -> str:
    if isinstance(value, (dict, list)):
        return json_type_name(value)
    text = json.dumps(value, ensure_ascii=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_type(value: Any, type_name: str) -> bool:
    if isinstance(value, bool):
        return type_name == "boolean"
    return isinstance(value, PY_TYPES[type_name])


def compile_schema(schema: dict[str, Any], root: dict[str, Any] | None = None) -> Check:
    """Compile a schema node into ``check(value, path)``, raising :class:`SchemaViolation`.

    ``path`` is where the value sits in the record (``("producer",)``); messages name it.
    """
    inner = _compile(schema, schema if root is None else root)

    def check(value: Any, path: Path = ()) -> None:
        if inner is None:
            return
        try:
            inner(value)
        except _Failure as failure:
            raise failure.violation(path) from None
    return check


def _compile(schema: dict[str, Any], root: dict[str, Any]) -> _Inner | None:
    """One closure for a schema node, or None when the node allows any value."""
    unknown = set(schema) - SUPPORTED - ANNOTATIONS
    if unknown:
        raise ValueError(f"schema keywords {sorted(unknown)} are not supported by this validator")
    if "$ref" in schema:
        ref = schema["$ref"]
        if not ref.startswith("#/$defs/") or len(schema.keys() - ANNOTATIONS) > 1:
            raise ValueError(f"only a lone local #/$defs/ reference is supported, not {schema}")
        return _compile(root["$defs"][ref.removeprefix("#/$defs/")], root)  # its description is the hint
    hint = schema.get("description", "")
    shaped, tests_type = (_string_check(schema, hint) or _object_check(schema, root)
                          or _array_check(schema, root, hint) or (None, False))
    type_check = None if tests_type else _type_check(schema, hint)
    checks = [c for c in (type_check, _value_check(schema, hint), shaped) if c is not None]
    if len(checks) <= 1:
        return checks[0] if checks else None

    def check(value: Any) -> None:
        for one in checks:
            one(value)
    return check


def _type_check(schema: dict[str, Any], hint: str) -> _Inner | None:
    if "type" not in schema:
        return None
    type_name = schema["type"]

    def check_type(value: Any) -> None:
        if not _is_type(value, type_name):
            raise _Failure(f"expected {type_name}, got {json_type_name(value)} {_show(value)}",
                           hint or f"write a JSON {type_name} here")
    return check_type


def _value_check(schema: dict[str, Any], hint: str) -> _Inner | None:
    if "const" in schema:
        const = schema["const"]

        def check_const(value: Any) -> None:
            if value != const or type(value) is not type(const):
                raise _Failure(f"must be {_show(const)}, got {_show(value)}", hint or f"write {_show(const)}")
        return check_const
    if "enum" in schema:
        allowed = tuple(schema["enum"])
        allowed_set = frozenset(allowed)

        def check_enum(value: Any) -> None:
            if not isinstance(value, str) or value not in allowed_set:
                close = difflib.get_close_matches(str(value), allowed, n=1)
                suggestion = f" (did you mean {close[0]!r}?)" if close else ""
                raise _Failure(f"{_show(value)} is not allowed{suggestion}", "use one of: " + ", ".join(allowed))
        return check_enum
    return None


def _string_check(schema: dict[str, Any], hint: str) -> tuple[_Inner, bool] | None:
    """One check for string keywords; it also tests the type when the node says type: string."""
    if not {"minLength", "maxLength", "pattern", "format"} & schema.keys():
        return None
    lo, hi = schema.get("minLength", 0), schema.get("maxLength", 1 << 62)
    matches = re.compile(schema["pattern"]).search if "pattern" in schema else None
    fmt = schema.get("format")
    if fmt not in (None, "date-time"):
        raise ValueError(f"format {fmt!r} is not supported")

    is_typed = schema.get("type") == "string"
    valid_seen: set[str] = set()  # producers, timestamps and subjects repeat across records

    def check_string(value: Any) -> None:
        if not isinstance(value, str):
            if is_typed:
                raise _Failure(f"expected string, got {json_type_name(value)} {_show(value)}",
                               hint or "write a JSON string here")
            return
        if value in valid_seen:
            return
        if not lo <= len(value) <= hi:
            what = "empty" if not value else f"{len(value)} characters long"
            raise _Failure(f"is {what}; allowed {lo}..{hi} characters", hint or "shorten it")
        if matches is not None and matches(value) is None:
            raise _Failure(f"{_show(value)} is malformed", hint or f"match {schema['pattern']}")
        if fmt is not None:
            _check_datetime(value, hint)
        if len(valid_seen) < MAX_REMEMBERED:
            valid_seen.add(value)
    return check_string, is_typed


def _check_datetime(value: str, hint: str) -> None:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise _Failure(f"{_show(value)} is not an ISO 8601 date-time", hint) from None
    if parsed.tzinfo is None:
        raise _Failure(f"{_show(value)} has no UTC offset", hint or "append Z for UTC")


def _in_field(failure: _Failure, key: str | int) -> _Failure:
    failure.parts.append(key)
    return failure


def _object_check(schema: dict[str, Any], root: dict[str, Any]) -> tuple[_Inner, bool] | None:
    props = {key: _compile(sub, root) for key, sub in schema.get("properties", {}).items()}
    required = tuple(schema.get("required", ()))
    is_closed = schema.get("additionalProperties") is False
    if not props and not required and not is_closed:
        return None
    names, required_names = frozenset(props), frozenset(required)
    prop_items = tuple((key, sub) for key, sub in props.items() if sub is not None)
    is_typed = schema.get("type") == "object"

    def check_object(value: Any) -> None:
        if not isinstance(value, dict):
            if is_typed:
                raise _Failure(f"expected object, got {json_type_name(value)} {_show(value)}",
                               schema.get("description") or "write a JSON object here")
            return
        keys = value.keys()
        if is_closed and not keys <= names:  # first: a misspelt field explains a missing one
            key = next(key for key in value if key not in props)
            close = difflib.get_close_matches(key, list(props), n=1)
            fix = f"did you mean `{close[0]}`?" if close else "allowed: " + ", ".join(props)
            raise _in_field(_Failure("is not a field of this object", f"remove it or fix its spelling ({fix})"), key)
        if not required_names <= keys:
            key = next(key for key in required if key not in value)
            raise _in_field(_Failure("is missing", f"add the field `{key}`"), key)
        for key, sub in prop_items:
            item = value.get(key, _MISSING)
            if item is not _MISSING:
                try:
                    sub(item)
                except _Failure as failure:
                    raise _in_field(failure, key)
    return check_object, is_typed


def _array_check(schema: dict[str, Any], root: dict[str, Any], hint: str) -> tuple[_Inner, bool] | None:
    if "items" not in schema and "maxItems" not in schema:
        return None
    item_check = _compile(schema["items"], root) if "items" in schema else None
    max_items = schema.get("maxItems", 1 << 62)
    is_typed = schema.get("type") == "array"

    def check_array(value: Any) -> None:
        if not isinstance(value, list):
            if is_typed:
                raise _Failure(f"expected array, got {json_type_name(value)} {_show(value)}",
                               hint or "write a JSON array here")
            return
        if len(value) > max_items:
            raise _Failure(f"has {len(value)} items; at most {max_items} allowed", hint or "split it")
        if item_check is not None:
            for index, item in enumerate(value):
                try:
                    item_check(item)
                except _Failure as failure:
                    raise _in_field(failure, index)
    return check_array, is_typed


_SCHEMA_FILES = {"bitcase.evidence/v1": "evidence-v1.json", "bitcase.evidence/v2": "evidence-v2.json"}
CURRENT_SCHEMA = "bitcase.evidence/v2"


@lru_cache(maxsize=None)
def evidence_schema(schema_id: str = CURRENT_SCHEMA) -> dict[str, Any]:
    """The shipped JSON Schema of a bundle format (``evidence_db/schema/evidence-v2.json`` by default)."""
    text = resources.files("evidence_db.schema").joinpath(_SCHEMA_FILES[schema_id]).read_text(encoding="utf-8")
    return json.loads(text)


@lru_cache(maxsize=None)
def _evidence_check(schema_id: str) -> Check:
    return compile_schema(evidence_schema(schema_id))


def schema_for(record: Any) -> str:
    """The schema a record is checked against: the one it names when known, else the current one.

    An unknown or missing ``schema`` is then reported by the current schema's ``const``.
    """
    name = record.get("schema") if isinstance(record, dict) else None
    return name if isinstance(name, str) and name in _SCHEMA_FILES else CURRENT_SCHEMA


@lru_cache(maxsize=None)
def evidence_part_checks(schema_id: str = CURRENT_SCHEMA) -> tuple[Check, Check, Check]:
    """Checks for a record without its producer and deployment, for a producer, for a deployment.

    Together they check exactly what :func:`validate_evidence` checks; split, so a caller can
    skip re-checking a producer or deployment identical to one already checked. Call the
    part checks with the path ``("producer",)`` or ``("deployment",)``.
    """
    schema = evidence_schema(schema_id)
    shell = {**schema, "properties": {**schema["properties"], "producer": {}, "deployment": {}}}
    return (compile_schema(shell), compile_schema(schema["properties"]["producer"], schema),
            compile_schema(schema["properties"]["deployment"], schema))


def validate_evidence(record: Any) -> None:
    """Check one parsed bundle record against its schema (v1 or v2); raise :class:`SchemaViolation`."""
    _evidence_check(schema_for(record))(record, ())
