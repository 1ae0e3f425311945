"""Whether evidence is still fresh: covered subjects unchanged (R5) and not too old (R6).

One :class:`Freshness` serves a whole evaluation and memoises per subject, so 100,000 items
naming a handful of files cost a dictionary lookup each.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Mapping

from assurance.subjects import SubjectMatcher, subject_key
from evidence_db.views import EvidenceView

__all__ = ["Freshness"]


def _short(digest: str) -> str:
    return digest.split(":", 1)[-1][:12]


def _parse_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


class Freshness:
    """Staleness checks against the current subject digests and D."""

    def __init__(self, subjects: Mapping[str, str], deployment_digest: str, now: datetime | None) -> None:
        self._subjects = subjects
        self._deployment = deployment_digest
        self._now = now
        self._by_subject: dict[tuple[str, str], tuple[str, str | None]] = {}
        self._matchers: dict[tuple[str, ...], SubjectMatcher] = {}

    def matcher(self, patterns: tuple[str, ...]) -> SubjectMatcher:
        """One shared matcher per distinct tuple of subject globs."""
        found = self._matchers.get(patterns)
        if found is None:
            found = self._matchers[patterns] = SubjectMatcher(patterns)
        return found

    def _subject(self, uri: str, sha256: str) -> tuple[str, str | None]:
        """(subject key, why the recorded digest is not current, or None)."""
        memo = self._by_subject.get((uri, sha256))
        if memo is not None:
            return memo
        key = subject_key(uri)
        current = self._deployment if key == "deployment" else self._subjects.get(key)
        cause = None
        if current is None:
            # A code file that is gone is stale; a model digest D does not record cannot be judged.
            cause = f"{key} no longer exists" if key.startswith("code:") else None
        elif current != sha256:
            cause = f"{key} changed ({_short(sha256)} -> {_short(current)})"
        self._by_subject[(uri, sha256)] = (key, cause)
        return key, cause

    def stale_cause(self, e: EvidenceView, matcher: SubjectMatcher, max_age_days: int | None
                    ) -> tuple[str | None, bool]:
        """(why ``e`` is stale or None, whether ``e`` names a covered subject)."""
        bound = False
        for sub in e.subjects:
            key, cause = self._subject(sub.uri, sub.sha256)
            if matcher.covers(key):
                bound = True
                if cause:
                    return cause, bound
        if max_age_days is not None and self._now is not None:
            produced = _parse_time(e.produced_at)
            if produced is not None and self._now - produced > timedelta(days=max_age_days):
                return f"older than max_age_days={max_age_days}", bound
        return None, bound
