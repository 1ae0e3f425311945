"""What every claim command judges: the case, the D and why that one, and the verified chain.

The claim commands (`status`, `check`, `trusted-base`, `whatif`, `export`) assess through
:func:`judged`: it prints which D was judged and why to stderr, verifies the hash chain in the
same read, and fails the verdict (exit 1, naming the first bad row) when the chain is broken,
before anything is evaluated. :func:`judged_json` is the same provenance for ``--json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from assurance.cli._case_options import emit_json, resolve_case_path, user_errors
from assurance.cli._common import EXIT_FINDINGS, err_console

__all__ = ["judged", "judged_json"]


def judged_json(result: Any) -> dict[str, Any]:
    """Which D was judged and why, and the chain check, as a JSON object."""
    return {"deployment": {"digest": result.deployment.digest, "chosen_because": result.deployment.source},
            "chain": result.store.chain_json()}


def judged(case: Path | None, config: str | None, plan: str | None, db: str | None, *, json_out: bool,
           root: Path | None = None) -> Any:
    """Assess the case under its D with the chain verified; exit 1 when the chain is broken."""
    from assurance.scope import assess
    from assurance.settings import load_settings

    with user_errors():
        path = resolve_case_path(case, db)
        home = load_settings(db=db).home
        result = assess(db=db, case_path=path, home=home, config=config, plan=plan, cache_dir=home / "cache",
                        root=root)
    err_console.print(f"case {path} · D {result.deployment.digest} ({result.deployment.source})",
                      highlight=False, soft_wrap=True, markup=False)
    from evidence_db.verified_read import chain_summary

    provenance = judged_json(result)
    summary = chain_summary(provenance["chain"])
    if result.evaluation is None:
        err_console.print(f"[bold red]error:[/] the verdict is FAIL: {escape(summary)}", highlight=False,
                          soft_wrap=True)
        if json_out:
            emit_json({"passed": False, "judged": provenance})
        raise typer.Exit(EXIT_FINDINGS)
    err_console.print(summary, highlight=False, soft_wrap=True, markup=False)
    for note in result.notes:
        err_console.print(f"[yellow]note:[/] {note}", highlight=False, soft_wrap=True)
    return result
