"""docs/evidence-format.md stays true: its example is a valid record with the digests it states."""

from __future__ import annotations

import json
import re
from pathlib import Path

from evidence_db.bundle import Deployment
from evidence_db.prepare import Preparer
from evidence_db.validate import evidence_schema

DOC = (Path(__file__).resolve().parents[2] / "docs" / "evidence-format.md").read_text(encoding="utf-8")


def test_example_record_is_valid_and_has_the_stated_digest() -> None:
    example = json.loads(re.search(r"```json\n(.*?)\n```", DOC, flags=re.S).group(1))
    stated = re.search(r"content digest\s+`(sha256:[0-9a-f]{64})`", DOC).group(1)
    assert Preparer()(example, "docs example").content_digest == stated
    assert Deployment(example["deployment"]["fields"]).digest == example["deployment"]["digest"]


def test_every_schema_field_is_documented() -> None:
    for field in evidence_schema()["properties"]:
        assert f"| `{field}` |" in DOC, field
