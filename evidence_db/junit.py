"""JUnit XML reports as evidence: each test case becomes one ``test_result`` record.

Parsed with defusedxml (entity declarations are refused, so entity-expansion attacks fail
fast). A test case's obligation comes from its ``obligation`` property (pytest:
``record_property("obligation", "...")``) or else from the first matching
``--obligation GLOB=OBLIGATION`` mapping over its test id (``classname.name``), else from
``default_obligation``; with ``skip_unmapped`` a test case with none is left out. The
deployment comes from ``--deployment FILE.json`` or else from a testsuite property
``bitcase.deployment`` holding the same JSON object. Record ids include a digest of the
report file, so re-ingesting the same report is a no-op and a new run gets new ids
(a re-mapping of the same report: ``evidence_db.junit_revisions``).

pytest 9 writes the ``xunit2`` family by default: its test cases carry no ``file``, ``line``
or properties (``record_property`` is refused there), so their obligations come from the
mapping and the record's ``details.junit.file``/``line`` stay null.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import math
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator, Sequence
from xml.etree.ElementTree import Element, ParseError

import defusedxml
import defusedxml.ElementTree as SafeET

from evidence_db.bundle import SCHEMA_ID
from evidence_db.canonical import digest_of, file_digest
from evidence_db.errors import BundleError

__all__ = ["junit_records", "unmapped_tests", "report_tag", "parse_deployment_json", "MAX_XML_BYTES",
           "DEPLOYMENT_PROPERTY"]

MAX_XML_BYTES = 64 * 1024 * 1024
MAX_TEXT_CHARS = 8192  # failure output kept per test case
DEPLOYMENT_PROPERTY = "bitcase.deployment"
STATUS_OF_CHILD = {"failure": "fail", "error": "error", "skipped": "inconclusive"}


def parse_deployment_json(value: Any, where: str) -> dict[str, Any]:
    """Check a deployment object ``{"fields": {...}, "digest": "sha256:…"?}``; fill in the digest."""
    if not isinstance(value, dict) or not isinstance(value.get("fields"), dict) or set(value) - {"fields", "digest"}:
        raise BundleError('expected a deployment object {"fields": {...}, "digest": "sha256:…"}', where=where,
                          hint='write the configuration under "fields"; "digest" is optional')
    digest = digest_of(value["fields"])
    if value.get("digest", digest) != digest:
        raise BundleError(f"digest {value['digest']} does not match the fields ({digest})", where=where,
                          field="digest", hint="drop the digest and let bitcase compute it")
    return {"fields": value["fields"], "digest": digest}


def _properties(element: Element) -> list[tuple[str, str]]:
    return [(p.get("name", ""), p.get("value", p.text or "")) for p in element.iterfind("properties/property")]


def _utc(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)  # JUnit writers that omit the offset mostly mean UTC
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _seconds(text: str | None) -> float | None:
    try:
        value = float(text or "")
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _load(path: Path) -> Element:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_XML_BYTES + 1)
    except OSError as exc:
        raise BundleError(f"cannot read: {exc.strerror}", where=str(path)) from None
    if len(data) > MAX_XML_BYTES:
        raise BundleError(f"JUnit report is larger than {MAX_XML_BYTES} bytes", where=str(path),
                          hint="split the test run into several reports")
    try:
        return SafeET.fromstring(data)
    except defusedxml.DefusedXmlException as exc:
        raise BundleError(f"refused XML: {exc}", where=str(path),
                          hint="JUnit reports must not declare entities or a DTD (entity expansion attacks)") from None
    except ParseError as exc:
        line, column = exc.position
        raise BundleError(f"not well-formed XML: {exc}",
                          where=f"{path}:{line}:{column}", hint="is this a JUnit XML report?") from None


def _suites(root: Element, path: Path) -> list[Element]:
    if root.tag == "testsuite":
        return [root]
    if root.tag == "testsuites":
        return [s for s in root.iter("testsuite") if s.find("testcase") is not None]
    raise BundleError(f"root element <{root.tag}> is not <testsuites> or <testsuite>", where=str(path),
                      hint="pass a JUnit XML report (pytest --junitxml=FILE)")


def _record_id(file_tag: str, test_id: str) -> str:
    record_id = f"junit:{file_tag}:{test_id}"
    if len(record_id) <= 512:
        return record_id
    return f"{record_id[:480]}~{hashlib.sha256(test_id.encode('utf-8', 'replace')).hexdigest()[:16]}"


def report_tag(digest: str) -> str:
    """The report tag of JUnit record ids: the first 16 hex digits of the report file's digest."""
    return digest.removeprefix("sha256:")[:16]


def _test_id(case: Element) -> str:
    classname, name = case.get("classname", ""), case.get("name", "")
    return f"{classname}.{name}" if classname else name


def _mapped(case: Element, test_id: str, obligation_map: Sequence[tuple[str, str]]) -> str | None:
    """A test case's obligation: its ``obligation`` property, else the first matching glob."""
    obligation = next((v for k, v in _properties(case) if k == "obligation"), None)
    if obligation is None:
        obligation = next((o for glob, o in obligation_map if fnmatch.fnmatchcase(test_id, glob)), None)
    return obligation or None


def unmapped_tests(path: Path, *, obligation_map: Sequence[tuple[str, str]] = ()) -> list[str]:
    """Test ids of a report's test cases that neither a property nor the mapping assigns."""
    root = _load(path)
    return [test_id for suite in _suites(root, path) for case in suite.iterfind("testcase")
            if _mapped(case, test_id := _test_id(case), obligation_map) is None]


def junit_records(path: Path, *, obligation_map: Sequence[tuple[str, str]] = (),
                  deployment: dict[str, Any] | None = None, default_obligation: str | None = None,
                  skip_unmapped: bool = False) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``(where, record_json_dict)`` for each test case of a JUnit XML report.

    A test case without an obligation takes ``default_obligation``; failing that it is left
    out when ``skip_unmapped``, else it is an error.
    """
    root = _load(path)
    digest = file_digest(path)
    file_tag = report_tag(digest)
    fallback_time = datetime.fromtimestamp(path.stat().st_mtime, tz=timezone.utc)
    seen: dict[str, int] = {}
    for suite in _suites(root, path):
        suite_name = suite.get("name") or "tests"
        props = dict(_properties(suite))
        where_suite = f"{path}: testsuite {suite_name!r}"
        suite_deployment = deployment
        if suite_deployment is None and DEPLOYMENT_PROPERTY in props:
            try:
                value = json.loads(props[DEPLOYMENT_PROPERTY])
            except (ValueError, RecursionError):
                raise BundleError(f"property {DEPLOYMENT_PROPERTY} is not valid JSON", where=where_suite,
                                  hint='its value is a JSON object {"fields": {...}}') from None
            suite_deployment = parse_deployment_json(value, f"{where_suite}: property {DEPLOYMENT_PROPERTY}")
        if suite_deployment is None:
            raise BundleError("JUnit test results need the deployment configuration they ran under",
                              where=where_suite, hint=f"pass --deployment FILE.json, or add a testsuite property "
                                                      f"{DEPLOYMENT_PROPERTY} holding {{\"fields\": {{...}}}}")
        try:
            started = datetime.fromisoformat(suite.get("timestamp") or "")
            produced_at = _utc(started)
        except (ValueError, OverflowError):  # absent, malformed, or out of range once made UTC
            started, produced_at = fallback_time, _utc(fallback_time)
        try:
            finished_at = _utc(started + timedelta(seconds=min(_seconds(suite.get("time")) or 0.0, 1e9)))
        except OverflowError:
            finished_at = produced_at
        producer = {"tool": f"junit ({suite_name})"[:200],
                    "version": props.get("bitcase.producer_version") or "unknown",
                    "command": props.get("bitcase.command", ""), "host": suite.get("hostname", "")[:255],
                    "accelerator": props.get("bitcase.accelerator") or "unknown",
                    "started_at": produced_at, "finished_at": finished_at}
        for case in suite.iterfind("testcase"):
            test_id = _test_id(case)
            seen[test_id] = seen.get(test_id, 0) + 1
            obligation = _mapped(case, test_id, obligation_map) or default_obligation
            if obligation is None:
                if skip_unmapped:
                    continue
                raise BundleError("no obligation for this test case", where=f"{path}: testcase {test_id!r}",
                                  hint="pass --obligation 'GLOB=OBLIGATION' matching its id, --default-obligation "
                                       "ID or --skip-unmapped, or add a testcase property `obligation` (pytest: "
                                       "record_property, xunit1 reports only)")
            yield _case_record(case, path, file_tag, digest, suite_name, seen[test_id], obligation, suite_deployment,
                               producer, produced_at)


def _case_record(case: Element, path: Path, file_tag: str, digest: str, suite_name: str, occurrence: int,
                 obligation: str, deployment: dict[str, Any],
                 producer: dict[str, str], produced_at: str) -> tuple[str, dict[str, Any]]:
    classname, name = case.get("classname", ""), case.get("name", "")
    test_id = _test_id(case)
    where = f"{path}: testcase {test_id!r}"
    props = _properties(case)
    outcome = next((child for child in case if child.tag in STATUS_OF_CHILD), None)
    status = "pass" if outcome is None else STATUS_OF_CHILD[outcome.tag]
    message = "" if outcome is None else (outcome.get("message") or "").strip()
    subjects = []
    for key, value in props:
        if key == "subject":
            uri, _, sha = value.rpartition(" ")
            subjects.append({"uri": uri.strip(), "sha256": sha})
    junit = {"classname": classname, "name": name, "file": case.get("file"), "line": case.get("line"),
             "time_s": _seconds(case.get("time")), "suite": suite_name}
    if outcome is not None:
        junit.update(outcome=outcome.tag, message=message[:MAX_TEXT_CHARS], type=outcome.get("type"),
                     text=(outcome.text or "")[:MAX_TEXT_CHARS])
    record_id = _record_id(file_tag, test_id if occurrence == 1 else f"{test_id}#{occurrence}")
    first_line = message.splitlines()[0][:400] if message else ""
    summary = f"{test_id}: {status}" + (f": {first_line}" if first_line else "")
    return where, {
        "schema": SCHEMA_ID, "id": record_id, "category": "test_result", "obligation": obligation,
        "status": status, "summary": summary[:65536], "producer": producer, "deployment": deployment,
        "subjects": subjects, "details": {"junit": junit, "report": {"name": path.name, "sha256": digest}},
        "produced_at": produced_at,
    }
