"""Validation of SARIF exports against the official SARIF 2.1.0 JSON Schema, where one is given.

bitcase does not ship the schema file; point ``$BITCASE_SARIF_SCHEMA`` at a copy of the
SARIF 2.1.0 JSON Schema to validate. CI (.ci/run) takes ``sarif-2.1.0-rtm.5.json`` from
Microsoft's ``@microsoft/jest-sarif`` package on the npm registry, pinned by digest.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

SKIP_REASON = ("the official SARIF 2.1.0 JSON Schema is not shipped with bitcase; set BITCASE_SARIF_SCHEMA to a "
               "copy of it (sarif-2.1.0-rtm.5.json in the @microsoft/jest-sarif npm package, as CI does) to "
               "validate exports against it")


def official_validator():
    """A Draft 4 validator of the official schema, or None when $BITCASE_SARIF_SCHEMA is unset."""
    path = os.environ.get("BITCASE_SARIF_SCHEMA")
    if not path:
        return None
    import jsonschema

    return jsonschema.Draft4Validator(json.loads(Path(path).read_text(encoding="utf-8")))


def validate_or_skip(log: dict) -> None:
    """Validate ``log`` against the official schema; skip the calling test when none is given."""
    validator = official_validator()
    if validator is None:
        pytest.skip(SKIP_REASON)
    validator.validate(log)
