"""A user's own project (tests/fixtures/ledger) copied to a temporary directory, and its store.

Each test runs inside the copy, as a user would in their checkout, and drives bitcase
through its CLI with relative paths.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assurance.cli.main import app

FIXTURE = Path(__file__).parent.parent / "fixtures" / "ledger"
MAPPING = ["--obligation", "*check_ledger.test_postings_balance=ledger.balances",
           "--obligation", "*check_ledger.*=ledger.rounding"]
runner = CliRunner()


def invoke(*args: object):
    """Run ``bitcase ARGS`` in-process; stdout and stderr stay apart."""
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="session")
def empty_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from evidence_db.migrate import ensure_store

    path = tmp_path_factory.mktemp("store") / "empty.db"
    ensure_store(f"sqlite:///{path}")
    return path


@pytest.fixture
def project(tmp_path: Path, empty_store: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The ledger project in a fresh directory (the working directory), with an empty store."""
    root = tmp_path / "ledger"
    shutil.copytree(FIXTURE, root)
    shutil.copyfile(empty_store, root / "bitcase.db")
    monkeypatch.chdir(root)
    monkeypatch.delenv("BITCASE_CASE", raising=False)
    return root
