"""Errors the evidence store raises: every one says what went wrong, where, and how to fix it.

They subclass :class:`assurance.cli._common.BitcaseError`, so the CLI turns them into an exit
code (2, or 1 for a damaged store: a finding, not a usage error) with the message and hint, and
library callers can catch one type.
"""

from __future__ import annotations

from assurance.cli._common import BitcaseError

__all__ = ["StoreError", "StoreDamaged", "SchemaNotCurrent", "BundleError", "RecordConflict", "KeyringError",
           "SignatureError"]


class StoreError(BitcaseError):
    """The store cannot be opened or written (missing, unreachable, busy)."""


class StoreDamaged(StoreError):
    """A stored row no bitcase write could have produced: a finding about the store (exit code 1)."""

    exit_code = 1


class SchemaNotCurrent(StoreError):
    """The store's schema is not at the head revision of the shipped migrations."""


class BundleError(BitcaseError):
    """A bad input record: names the file, the line or record number and the field."""

    def __init__(self, message: str, *, where: str = "", field: str = "", hint: str | None = None) -> None:
        self.where = where  # "bundle.jsonl:12" or "report.xml: testcase tests.x.test_y"
        self.field = field  # dotted path inside the record, "" when the record as a whole is bad
        prefix = f"{where}: " if where else ""
        at_field = f"field `{field}`: " if field else ""
        super().__init__(f"{prefix}{at_field}{message}", hint=hint)


class RecordConflict(BundleError):
    """A record id already stored (or repeated in the input) with different content."""


class KeyringError(BitcaseError):
    """A signing key or trusted key that cannot be found, read or used."""


class SignatureError(BundleError):
    """A signature that does not verify, or one that policy refuses (unsigned, untrusted key)."""
