"""Ingesting files: bundles (JSONL, JSON) and JUnit XML, all in the caller's one transaction.

:func:`ingest_paths` is what ``bitcase ingest`` runs; any bad record raises a
:class:`~evidence_db.errors.BundleError` naming file, line or record, and field, and the
caller's rollback leaves the store as it was. On Linux, files of :data:`WORKER_MIN_BYTES` or more
are read and validated in a worker process while this one inserts (``evidence_db.pipeline``).
"""

from __future__ import annotations

import stat
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Iterator, Sequence

from sqlalchemy.orm import Session

from evidence_db.bundle_sig import BundleSignature, read_signature, signature_path
from evidence_db.canonical import file_digest
from evidence_db.errors import BundleError, SignatureError
from evidence_db.junit import junit_records, parse_deployment_json, report_tag
from evidence_db.junit_revisions import StoredRevisions, revised, stored_revisions
from evidence_db.keyring import TrustedKeys
from evidence_db.pipeline import can_use_worker, prepared_in_worker
from evidence_db.prepare import CheckedRecord, PreparedRecord, Preparer
from evidence_db.reader import STDIN, iter_json, iter_jsonl, sniff_kind
from evidence_db.unique_keys import DuplicateKey, loads_unique
from evidence_db.store import BATCH_SIZE, ingest_prepared
from evidence_db.views import IngestResult

__all__ = ["ingest_paths", "expand_paths", "parse_obligation_map", "load_deployment_file", "JunitOptions",
           "SignaturePolicy", "INPUT_SUFFIXES"]

INPUT_SUFFIXES = (".jsonl", ".ndjson", ".json", ".xml")
MAX_DEPLOYMENT_FILE_BYTES = 16 * 1024 * 1024
WORKER_MIN_BYTES = 4 * 1024 * 1024  # below this, starting a worker process costs more than it saves


@dataclass(frozen=True, slots=True)
class SignaturePolicy:
    """What ingest accepts: with ``is_signed_required``, only bundles signed by a key in ``trusted``."""

    trusted: TrustedKeys
    is_signed_required: bool = False


def expand_paths(paths: Sequence[Path]) -> list[Path]:
    """Files to ingest: files as given (``-`` is standard input), directories expanded to their
    bundles and reports (sorted), each file once."""
    files: list[Path] = []
    for path in paths:
        if path == STDIN:
            files.append(path)
        elif path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix.lower() in INPUT_SUFFIXES and p.is_file())
            if not found:
                raise BundleError("directory holds no bundles or reports", where=str(path),
                                  hint="bitcase ingest reads *.jsonl, *.ndjson, *.json and *.xml files")
            files.extend(found)
        elif path.exists():
            files.append(path)
        else:
            raise BundleError("no such file or directory", where=str(path), hint="check the path")
    unique: dict[Path, Path] = {}
    for path in files:
        unique.setdefault(path if path == STDIN else path.resolve(), path)
    return list(unique.values())


def parse_obligation_map(specs: Sequence[str]) -> list[tuple[str, str]]:
    """``["tests.engine.*=G2", …]`` as ``[(glob, obligation), …]``, in the order given."""
    pairs = []
    for spec in specs:
        glob, sep, obligation = spec.rpartition("=")
        if not sep or not glob.strip() or not obligation.strip():
            raise BundleError(f"--obligation {spec!r} is not TESTID_GLOB=OBLIGATION",
                              hint="e.g. --obligation 'tests.engine.test_sched.*=G_scheduler'")
        pairs.append((glob.strip(), obligation.strip()))
    return pairs


def load_deployment_file(path: Path) -> dict[str, Any]:
    """The deployment object of a ``--deployment FILE.json`` (``{"fields": {...}, "digest"?: …}``)."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_DEPLOYMENT_FILE_BYTES + 1)
    except OSError as exc:
        raise BundleError(f"cannot read deployment file: {exc.strerror}", where=str(path)) from None
    if len(raw) > MAX_DEPLOYMENT_FILE_BYTES:
        raise BundleError(f"deployment file is larger than {MAX_DEPLOYMENT_FILE_BYTES} bytes", where=str(path))
    try:
        value = loads_unique(raw.decode("utf-8"))
    except DuplicateKey as exc:
        raise BundleError(f"an object names the key {exc.key!r} twice", where=str(path),
                          hint="keep one: JSON parsers disagree on which value wins") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BundleError(f"deployment file is not valid UTF-8 JSON: {exc}", where=str(path),
                          hint='write {"fields": {...}} as UTF-8 JSON') from None
    return parse_deployment_json(value, str(path))


@dataclass(frozen=True, slots=True)
class JunitOptions:
    """How JUnit reports become records (bundles carry all of this themselves)."""

    obligation_map: Sequence[tuple[str, str]] = ()  # (test id glob, obligation), first match wins
    deployment: dict[str, Any] | None = None  # default: the testsuite property
    default_obligation: str | None = None  # for test cases nothing else maps
    skip_unmapped: bool = False  # leave out test cases without an obligation
    remap: bool = False  # a report stored before with other records: supersede them


def _parsed(path: Path, junit: JunitOptions, stored: StoredRevisions | None) -> Iterator[tuple[str, Any]]:
    kind = sniff_kind(path)
    if kind == "junit":
        records = junit_records(path, obligation_map=junit.obligation_map, deployment=junit.deployment,
                                default_obligation=junit.default_obligation, skip_unmapped=junit.skip_unmapped)
        return revised(records, stored, remap=junit.remap) if stored else records
    return iter_json(path) if kind == "json" else iter_jsonl(path)


def _prepared(path: Path, junit: JunitOptions, stored: StoredRevisions | None) -> Iterator[PreparedRecord]:
    prepare = Preparer()
    for where, record in _parsed(path, junit, stored):
        yield prepare(record, where)


def _checked(path: Path, junit: JunitOptions, stored: StoredRevisions | None) -> Iterator[CheckedRecord]:
    """The worker's half of :func:`_prepared` (see ``evidence_db.pipeline``)."""
    check = Preparer().check
    for where, record in _parsed(path, junit, stored):
        yield check(record, where)


def _is_large_file(path: Path, min_bytes: int) -> bool:
    """A regular file of at least ``min_bytes`` (standard input and pipes are read here)."""
    if path == STDIN:
        return False
    try:
        info = path.stat()
    except OSError:
        return False  # reading it reports the problem
    return stat.S_ISREG(info.st_mode) and info.st_size >= min_bytes


def _stored_records(session: Session, path: Path) -> StoredRevisions | None:
    """What the store holds of this JUnit report already (None for bundles)."""
    if path == STDIN or sniff_kind(path) != "junit":
        return None
    try:
        digest = file_digest(path)
    except OSError:
        return None  # reading the report reports it
    return stored_revisions(session=session, report_tag=report_tag(digest))


def ingest_paths(*, session: Session, paths: Sequence[Path], obligation_map: Sequence[tuple[str, str]] = (),
                 deployment: dict[str, Any] | None = None, junit: JunitOptions | None = None,
                 signed: SignaturePolicy | None = None,
                 worker_min_bytes: int = WORKER_MIN_BYTES) -> list[tuple[Path, IngestResult]]:
    """Ingest each file into the session's transaction; return what each file added.

    ``junit`` (or, short for it, ``obligation_map`` and ``deployment``) applies to JUnit reports
    only (bundles carry both). A bundle with a ``.sig`` beside it is checked against its
    signature (any mismatch raises :class:`~evidence_db.errors.SignatureError`) and stored with
    its signer; ``signed`` can also refuse unsigned input and keys it does not trust.
    Files of ``worker_min_bytes`` or more are prepared in a worker process (same records,
    same errors). Does not commit: use ``open_session(url, write=True)`` so that all files
    land together or, on any error, none do.
    """
    if junit is None:
        junit = JunitOptions(obligation_map=tuple(obligation_map), deployment=deployment)
    results = []
    files = expand_paths(paths)
    signatures = [_signature_of(path, signed) for path in files]  # every file's, before storing any
    for path, signature in zip(files, signatures):
        stored = _stored_records(session, path)
        if can_use_worker() and _is_large_file(path, worker_min_bytes):
            source = prepared_in_worker(partial(_checked, path, junit, stored), batch_size=BATCH_SIZE)
        else:
            source = nullcontext(_prepared(path, junit, stored))
        with source as records:
            results.append((path, ingest_prepared(session=session, records=records, signature=signature)))
    return results


def _signature_of(path: Path, policy: SignaturePolicy | None) -> BundleSignature | None:
    """The verified signature of a file (None: unsigned), refused as ``policy`` says."""
    is_signable = path != STDIN and sniff_kind(path) != "junit"
    signature = read_signature(path) if is_signable else None
    if policy is None or not policy.is_signed_required:
        return signature
    if signature is None:
        why = ("a bundle on standard input has no signature file" if path == STDIN else
               "a JUnit report cannot be signed" if not is_signable else
               f"the bundle is unsigned (no {signature_path(path).name} beside it)")
        raise SignatureError(f"{why}; --require-signed refuses unsigned input", where=str(path),
                             hint="produce bundles with --sign-key (or $BITCASE_SIGNING_KEY), or drop --require-signed")
    if policy.trusted.get(signature.key_id) is None:
        raise SignatureError(f"signed by key {signature.key_id} ({signature.signer.name or 'no name'}), which is not "
                             f"trusted; --require-signed refuses it", where=str(path),
                             hint="if you vouch for that key: `bitcase key trust FILE.pub` (its owner has the .pub)")
    return signature
