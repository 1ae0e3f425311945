"""Which deployment configuration D a claim command judges, and why that one.

A gate must not change its verdict because someone ingested unrelated evidence under another
D, so D is never taken from the store's contents unless asked for (``latest``). In order:

1. ``--config`` on the command line;
2. ``deployment = "…"`` in the case's ``[case]`` table (a digest or prefix, ``current`` or ``latest``);
3. ``deployment = "…"`` in the project file ``<home>/project.toml`` (``bitcase init`` writes one
   with ``current``);
4. for the bundled case, ``current``: the configuration the bundled engine would run now.

Anything else has no D to judge, and the command says how to pin one.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from assurance.cli._common import BitcaseError

__all__ = ["Pin", "PROJECT_FILE", "gate_pin", "case_pin", "project_pin", "write_project_pin"]

PROJECT_FILE = "project.toml"


@dataclass(frozen=True, slots=True)
class Pin:
    """A ``--config``-style spec (digest or prefix, ``current``, ``latest``) and where it came from."""

    spec: str
    why: str


def _checked(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BitcaseError(f"{where}: `deployment` must be a non-empty string",
                           hint='write deployment = "sha256:…" (a digest or unique prefix), "current" or "latest"')
    return value.strip()


def case_pin(case_path: Path) -> Pin | None:
    """The pin in the case's ``[case]`` table, if any (only the header is parsed when it comes first)."""
    try:
        text = case_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None  # loading the case reports it, with its own message
    cut = text.find("\n[[")
    for candidate in ((text[:cut], text) if cut >= 0 else (text,)):
        try:
            header = tomllib.loads(candidate).get("case")
        except tomllib.TOMLDecodeError:
            continue  # the prefix may end mid-table; the whole file's error is the case loader's to report
        if isinstance(header, dict):
            if "deployment" not in header:
                return None
            return Pin(_checked(header["deployment"], f"{case_path} [case]"),
                       f"pinned by the case ({case_path}, [case] deployment)")
    return None


def project_pin(home: Path) -> Pin | None:
    """The pin in ``<home>/project.toml``, if the file exists."""
    path = home / PROJECT_FILE
    if not path.is_file():
        return None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise BitcaseError(f"cannot read the project file {path}: {exc}",
                           hint='it holds one line: deployment = "sha256:…", "current" or "latest"') from None
    if "deployment" not in data:
        return None
    return Pin(_checked(data["deployment"], str(path)), f"pinned by the project file {path}")


def write_project_pin(home: Path, spec: str) -> Path:
    """Write ``<home>/project.toml`` pinning ``spec`` (kept when it exists); return its path."""
    path = home / PROJECT_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("# The deployment configuration D that `bitcase check`, `status` and `export` judge:\n"
                        "# a digest (or unique prefix), \"current\" (what the engine would run now) or \"latest\"\n"
                        "# (the newest D in the store, which anyone's ingest can change).\n"
                        f"deployment = {spec!r}\n".replace("'", '"'), encoding="utf-8")
    return path


def gate_pin(config: str | None, *, case_path: Path, home: Path, bundled_case: Path) -> Pin:
    """The D spec a claim command judges, by the order in the module docstring."""
    if config:
        return Pin(config, "--config")
    for pin in (case_pin(case_path), project_pin(home)):
        if pin is not None:
            return pin
    if case_path.resolve() == bundled_case.resolve():
        return Pin("current", "the bundled case judges what the engine would run now")
    raise BitcaseError(f"no deployment configuration D is pinned for {case_path}",
                       hint=f'pass --config DIGEST (or `current`, or `latest` for the newest in the store), or pin '
                            f'it: deployment = "sha256:…" in the case\'s [case] table or in {home / PROJECT_FILE}')
