"""The Qwen3, Mistral and Gemma3 presets' sealed plans: every entry the tiny plan lacks is verified, the q/k norm's too."""

import json

import pytest
from typer.testing import CliRunner

from assurance.cli.main import app
from kernels.plan import preset_plan
from proofs.planrun import targets_from_plan, verify_target

TINY_KEYS = set(preset_plan("tiny").keys())
NEW_TARGETS = [t for name in ("qwen3-tiny", "mistral-tiny", "gemma3-tiny") for t in targets_from_plan(preset_plan(name))
               if t.key not in TINY_KEYS]


@pytest.mark.parametrize("target", NEW_TARGETS, ids=lambda t: t.key)
def test_family_plan_entry_is_verified(target):
    result = verify_target(target)
    assert result.verdict == "VERIFIED", result.reason


def test_the_real_shape_q_k_norm_is_verified_through_the_cli():
    result = CliRunner().invoke(app, ["verify", "--plan", "qwen3-0.6b", "--key", "rms_norm.h128", "--json"])
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.stdout)
    assert entry["verdict"] == "VERIFIED" and entry["key"] == "rms_norm.h128"


@pytest.mark.parametrize("key", ["gelu_tanh_mul.i6912", "rms_norm.h1152_residual_offset",
                                 "embedding.v262144_h1152_scaled"])
def test_the_gemma3_1b_kernels_are_verified_through_the_cli(key):
    result = CliRunner().invoke(app, ["verify", "--plan", "gemma3-1b", "--key", key, "--json"])
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.stdout)
    assert entry["verdict"] == "VERIFIED" and entry["key"] == key
