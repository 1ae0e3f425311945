"""The Qwen3, Mistral and Gemma3 presets' sealed plans: every entry the tiny plan lacks is verified, the q/k norm's too.

The real-shape entries proved through `bitcase verify` live in test_cli.py: a module that drives the
CLI is re-run at two more terminal widths (tests/test_terminal_width.py), and these proofs print nothing."""

import pytest

from kernels.plan import preset_plan
from proofs.planrun import targets_from_plan, verify_target

TINY_KEYS = set(preset_plan("tiny").keys())
NEW_TARGETS = [t for name in ("qwen3-tiny", "mistral-tiny", "gemma3-tiny") for t in targets_from_plan(preset_plan(name))
               if t.key not in TINY_KEYS]


@pytest.mark.parametrize("target", NEW_TARGETS, ids=lambda t: t.key)
def test_family_plan_entry_is_verified(target):
    result = verify_target(target)
    assert result.verdict == "VERIFIED", result.reason

