"""This package's command groups as one app, registered as the main CLI does them.

``python -m tests.evidence_db.cli_main ingest …`` runs it as a process (multi-process tests).
"""

from __future__ import annotations

import typer

from assurance.cli import audit, db, ingest


def build_app() -> typer.Typer:
    """A fresh app with the `db` and `audit` groups and the `ingest` command."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    for module in (db, ingest, audit):
        module.register(app)
    return app


if __name__ == "__main__":
    build_app()()
