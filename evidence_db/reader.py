"""Reading bundle files: JSONL streamed line by line, or JSON (one object or an array).

Hostile input gets a :class:`BundleError` naming the file and line, never a traceback or a
hang: lines are read with a length cap (a multi-GB file without newlines fails at the cap),
bytes are decoded as strict UTF-8, nesting and numbers are bounded (see ``prepare``).
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

from evidence_db.errors import BundleError
from evidence_db.lineparse import LineParser
from evidence_db.unique_keys import DuplicateKey, loads_unique
from evidence_db.validate import json_type_name

__all__ = ["BundleKind", "STDIN", "sniff_kind", "iter_jsonl", "iter_json", "MAX_LINE_BYTES", "MAX_JSON_FILE_BYTES"]

MAX_LINE_BYTES = 16 * 1024 * 1024  # one JSONL record
MAX_JSON_FILE_BYTES = 64 * 1024 * 1024  # a whole .json bundle (parsed in memory)

BundleKind = str  # "jsonl" | "json" | "junit"
SUFFIX_KINDS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".xml": "junit"}


STDIN = Path("-")  # `bitcase ingest -`: a JSONL bundle on standard input


def _open(path: Path) -> Any:
    if path == STDIN:
        return contextlib.nullcontext(sys.stdin.buffer)  # read, never closed: it is not ours
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise BundleError("no such file", where=str(path), hint="check the path") from None
    except IsADirectoryError:
        raise BundleError("is a directory", where=str(path), hint="pass files, or a directory to ingest") from None
    except OSError as exc:
        raise BundleError(f"cannot read: {exc.strerror}", where=str(path)) from None


def sniff_kind(path: Path) -> BundleKind:
    """The input kind, by suffix (.jsonl/.ndjson, .json, .xml) or else by the first byte."""
    kind = SUFFIX_KINDS.get(path.suffix.lower())
    if kind is not None:
        return kind
    if path == STDIN:
        return "jsonl"  # a pipe cannot be sniffed without consuming it
    with _open(path) as f:
        head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(b"<"):
        return "junit"
    if head.startswith(b"["):
        return "json"
    if head.startswith(b"{"):
        return "jsonl"
    raise BundleError("cannot tell what this file is", where=str(path),
                      hint="name bundles *.jsonl or *.json and JUnit reports *.xml")


def _parse(data: bytes, where: str, loads: Callable[[bytes], Any]) -> Any:
    try:
        return loads(data)
    except DuplicateKey as exc:
        raise BundleError(f"an object names the key {exc.key!r} twice", where=where,
                          hint="keep one: JSON parsers disagree on which value wins (some keep the first, "
                               "Python the last)") from None
    except UnicodeDecodeError as exc:
        raise BundleError(f"invalid UTF-8 at byte {exc.start}", where=where,
                          hint="bundles are UTF-8 text; re-encode the file") from None
    except json.JSONDecodeError as exc:
        raise BundleError(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", where=where,
                          hint="each record must be one complete JSON object") from None
    except RecursionError:
        raise BundleError("JSON nested too deeply", where=where, hint="flatten the record") from None
    except ValueError as exc:  # e.g. an integer literal with thousands of digits
        raise BundleError(f"unreadable JSON number: {exc}", where=where,
                          hint="integers must fit in 64 bits; write big values as strings") from None


def _loads_utf8(data: bytes) -> Any:
    return loads_unique(data.decode("utf-8"))


def iter_jsonl(path: Path, *, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[str, Any]]:
    """Yield ``(where, parsed_object)`` for each non-blank line, reading one line at a time."""
    parser = LineParser()
    with _open(path) as f:
        line_no = 0
        while True:
            raw = f.readline(max_line_bytes + 1)
            if not raw:
                return
            line_no += 1
            where = f"{'<stdin>' if path == STDIN else path}:{line_no}"
            if len(raw) > max_line_bytes:
                raise BundleError(f"line is longer than {max_line_bytes} bytes", where=where,
                                  hint="one record per line; keep bulky data out of records (reference it "
                                       "as a subject by digest)")
            if line_no == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte order mark some editors add
            if raw.isspace():
                continue
            yield where, _parse(raw, where, parser.parse)


def iter_json(path: Path, *, max_file_bytes: int = MAX_JSON_FILE_BYTES) -> Iterator[tuple[str, Any]]:
    """Yield ``(where, parsed_object)`` for a JSON bundle: one record object or an array of them."""
    with _open(path) as f:
        raw = f.read(max_file_bytes + 1)
    where = str(path)
    if len(raw) > max_file_bytes:
        raise BundleError(f"JSON bundle is larger than {max_file_bytes} bytes", where=where,
                          hint="write large bundles as JSONL (one record per line, *.jsonl); they are streamed")
    value = _parse(raw.removeprefix(b"\xef\xbb\xbf"), where, _loads_utf8)
    if isinstance(value, list):
        for index, item in enumerate(value):
            yield f"{where}: record {index + 1}", item
    elif isinstance(value, dict):
        yield f"{where}: record 1", value
    else:
        raise BundleError(f"expected a record object or an array of records, got {json_type_name(value)}",
                          where=where, hint="see docs/evidence-format.md for the bundle format")
