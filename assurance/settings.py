"""Application settings, read from ``BITCASE_*`` environment variables.

Database URL precedence: an explicit ``--db`` option, then ``BITCASE_DB``, then
``DATABASE_URL`` (the conventional PostgreSQL variable), then ``./bitcase.db`` (SQLite).
A bare file path is accepted anywhere a URL is and means a SQLite file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Settings", "resolve_db_url", "load_settings"]

DEFAULT_SQLITE_PATH = "bitcase.db"


def resolve_db_url(explicit: str | None = None, *, environ: dict[str, str] | None = None) -> str:
    """The SQLAlchemy URL to use, by the precedence documented in this module."""
    env = os.environ if environ is None else environ
    raw = explicit or env.get("BITCASE_DB") or env.get("DATABASE_URL") or DEFAULT_SQLITE_PATH
    if "://" in raw:
        if raw.startswith("postgresql://") or raw.startswith("postgres://"):
            # Plain postgres URLs (as most hosts hand them out) get the psycopg 3 driver.
            raw = "postgresql+psycopg://" + raw.split("://", 1)[1]
        return raw
    return f"sqlite:///{Path(raw).expanduser().resolve()}"


@dataclass(frozen=True, slots=True)
class Settings:
    """Resolved settings for one CLI invocation."""

    db_url: str
    home: Path  # working directory for generated models, bundles and reports
    out_dir: Path

    def __post_init__(self) -> None:
        if not self.db_url:
            raise ValueError("db_url must not be empty")


def load_settings(*, db: str | None = None, environ: dict[str, str] | None = None) -> Settings:
    """Settings from the environment, with an explicit ``--db`` taking precedence."""
    env = os.environ if environ is None else environ
    home = Path(env.get("BITCASE_HOME", ".bitcase")).expanduser()
    out_dir = Path(env.get("BITCASE_OUT", "bitcase-out")).expanduser()
    return Settings(db_url=resolve_db_url(db, environ=env), home=home, out_dir=out_dir)
