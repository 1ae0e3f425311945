"""Whether evidence is still fresh: covered subjects unchanged (R5) and not too old (R6).

One :class:`Freshness` serves a whole evaluation and memoises per subject and per (subject list,
solution globs), so 100,000 items naming a handful of files cost a dictionary lookup each.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Mapping

from assurance.subjects import SubjectMatcher, subject_key
from evidence_db.views import EvidenceView, SubjectView

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
        self._by_subjects: dict[tuple[tuple[SubjectView, ...], SubjectMatcher], tuple[str | None, bool]] = {}

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

    def _subjects_cause(self, subjects: tuple[SubjectView, ...], matcher: SubjectMatcher) -> tuple[str | None, bool]:
        """(why the first stale covered subject is stale or None, whether any subject is covered)."""
        bound = False
        for sub in subjects:
            key, cause = self._subject(sub.uri, sub.sha256)
            if matcher.covers(key):
                bound = True
                if cause:
                    return cause, bound
        return None, bound

    def stale_cause(self, e: EvidenceView, matcher: SubjectMatcher, max_age_days: int | None
                    ) -> tuple[str | None, bool]:
        """(why ``e`` is stale or None, whether ``e`` names a covered subject)."""
        memo_key = (e.subjects, matcher)  # items mostly name the same few subjects
        found = self._by_subjects.get(memo_key)
        if found is None:
            found = self._by_subjects[memo_key] = self._subjects_cause(e.subjects, matcher)
        cause, bound = found
        if cause is None and max_age_days is not None and self._now is not None:
            produced = _parse_time(e.produced_at)
            if produced is not None and self._now - produced > timedelta(days=max_age_days):
                return f"older than max_age_days={max_age_days}", bound
        return cause, bound
