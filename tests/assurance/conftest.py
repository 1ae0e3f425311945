"""Builders for cases, evidence views and reviews used by the assurance tests."""

from __future__ import annotations

import textwrap
from datetime import date, datetime, timezone
from itertools import count

import pytest

from assurance.case_loader import parse_case
from assurance.case_model import Case
from evidence_db.views import EvidenceView, ReviewView, SubjectView

D = "sha256:" + "d" * 64
OTHER_D = "sha256:" + "e" * 64
TODAY = date(2026, 11, 1)
NOW = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)
KERNEL_V1 = "sha256:" + "1" * 64
KERNEL_V2 = "sha256:" + "2" * 64

_seq = count(1)

MINI_CASE = """
[case]
id = "mini"
title = "A small case"
top = "G.top"

[[node]]
id = "G.top"
kind = "goal"
text = "The top claim"
source = "§1"
supported_by = ["S.split"]
in_context_of = ["C.d"]

[[node]]
id = "C.d"
kind = "context"
text = "Deployment D"

[[node]]
id = "S.split"
kind = "strategy"
text = "Argue over the parts"
supported_by = ["kernel.mm.contract", "suite.batch", "trusted.compiler"]

[[node]]
id = "kernel.mm.contract"
kind = "solution"
text = "Matmul contract proof"
requires = ["kernel_proof"]
subjects = ["code:kernels/*.py"]

[[node]]
id = "suite.batch"
kind = "solution"
text = "Batch suite"
any_of = ["test_result", "runtime_config_check"]
subjects = ["code:engine/**/*.py", "deployment"]

[[node]]
id = "trusted.compiler"
kind = "solution"
text = "The compiler keeps operation order"
trusted = true
rationale = "Pinned versions are part of D"
"""


def case_from(text: str) -> Case:
    """Parse case TOML written in a test (dedented)."""
    return parse_case(textwrap.dedent(text))


def ev(obligation: str, status: str = "pass", *, category: str = "kernel_proof", item: str | None = None,
       deployment: str = D, subjects: tuple[tuple[str, str], ...] = (), seq: int | None = None,
       produced_at: str = "2026-10-31T00:00:00Z", details: dict | None = None, summary: str = "") -> EvidenceView:
    """One evidence view with sensible defaults."""
    return EvidenceView(item_id=item or f"{obligation}.{category}.{status}", category=category,
                        obligation=obligation, status=status, summary=summary or f"{status} {obligation}",
                        deployment_digest=deployment, produced_at=produced_at,
                        content_digest="sha256:" + "c" * 64, producer_tool="test", producer_version="1",
                        subjects=tuple(SubjectView(u, s) for u, s in subjects), details=details or {},
                        seq=next(_seq) if seq is None else seq)


def review(target: str, digest: str, decision: str = "accept", *, expires: date | None = None,
           seq: int | None = None, reviewer: str = "auditor") -> ReviewView:
    """One review view."""
    return ReviewView(target=target, target_digest=digest, decision=decision, reviewer=reviewer,
                      rationale="looked at it", created_at="2026-10-30T00:00:00Z", expires=expires,
                      seq=next(_seq) if seq is None else seq)


@pytest.fixture
def mini_case() -> Case:
    """The small case above."""
    return case_from(MINI_CASE)
