"""Fixtures of the verifier tests: kernels and contracts beside them, verified by name."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
KERNELS = HERE / "kernels"
MUTANTS = HERE / "mutants"


def verify_file(path: Path, kernel: str, contract: Path | None = None, **constexprs):
    """Verify ``path::kernel`` against ``contract`` (default: the contract next to it, same stem, .toml)."""
    from proofs.contract import load_contract
    from proofs.driver import verify_kernel
    from proofs.source import load_kernel

    return verify_kernel(load_kernel(path, kernel), load_contract(contract or path.with_suffix(".toml")), constexprs)


@pytest.fixture
def verify():
    return verify_file


@pytest.fixture(scope="session")
def tiny_plan_results() -> dict:
    """Every tiny-plan entry's result by key, each verified once per session by the real verifier.

    Several tests read these results (each entry's verdict, the premises the wrappers assert, earlier
    verifier work in the process); the attention entries take seconds each, so they are proved once.
    """
    from kernels.plan import preset_plan
    from proofs.planrun import targets_from_plan, verify_target

    targets = targets_from_plan(preset_plan("tiny"))
    results = {t.key: verify_target(t) for t in targets}
    assert len(results) == len(targets), "tiny plan keys repeat"
    return results
