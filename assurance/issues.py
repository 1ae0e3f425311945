"""Problems found in a case file, each naming the file, the node and the fix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Issue", "CaseError"]


@dataclass(frozen=True, slots=True)
class Issue:
    """One problem in a case: ``code`` is a stable slug (see ``docs/case-format.md``)."""

    code: str
    file: str
    node: str | None  # node or generator id; None for file-level problems
    message: str
    fix: str
    line: int = 0

    def format(self) -> str:
        """``FILE:LINE: node ID: message (fix: ...)`` — one line, greppable."""
        where = f"{self.file}:{self.line}" if self.line else self.file
        who = f" node {self.node}:" if self.node else ""
        return f"{where}:{who} {self.message} [{self.code}] (fix: {self.fix})"

    def to_json(self) -> dict[str, Any]:
        """The issue as a JSON object."""
        return {"code": self.code, "file": self.file, "line": self.line, "node": self.node,
                "message": self.message, "fix": self.fix}


class CaseError(Exception):
    """A case file that cannot be used; carries every issue found."""

    def __init__(self, issues: list[Issue]) -> None:
        self.issues = list(issues)
        super().__init__("\n".join(i.format() for i in self.issues))
