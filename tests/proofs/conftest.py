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
