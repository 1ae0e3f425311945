"""Render what ``bitcase assure`` ends with: the HTML report (every D in the store) and the diagram (D)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

__all__ = ["render_outputs"]


def render_outputs(*, db_url: str, case_path: Path, out_dir: Path, deployment_digest: str,
                   say: Callable[[str], None]) -> tuple[str, str]:
    """Write ``report.html`` and ``trust-boundary.svg`` (or ``.dot`` without Graphviz); return both paths."""
    from assurance.render.adapter import report_model, scope_model
    from assurance.render.diagram import dot_source
    from assurance.render.graphviz import INSTALL_HINT, DotFailedError, DotMissingError, run_dot
    from assurance.render.html import RenderOptions, write_report
    from assurance.render.loading import load_state

    from assurance.export import tool_version

    state = load_state(db=db_url, case_path=case_path, pinned=False)
    model = report_model([(s.evaluation, s.fields, s.notes) for s in state.scopes], evidence=state.evidence,
                         reviews=state.reviews, store_ref=state.store_ref, case_ref=state.case_ref,
                         case_digest=state.case_digest, chain=state.chain, tool_version=tool_version())
    report = write_report(model, out_dir, RenderOptions())
    chosen = next(s for s in state.scopes if s.evaluation.deployment_digest == deployment_digest)
    scope = scope_model(chosen.evaluation, deployment_fields=chosen.fields, evidence=state.evidence,
                        reviews=state.reviews, notes=chosen.notes)
    dot_text = dot_source(scope)
    out_dir.mkdir(parents=True, exist_ok=True)
    dot_path = out_dir / "trust-boundary.dot"
    dot_path.write_text(dot_text, encoding="utf-8")
    try:
        svg_path = out_dir / "trust-boundary.svg"
        svg_path.write_bytes(run_dot(dot_text, "svg"))
        diagram = svg_path
    except (DotMissingError, DotFailedError) as exc:
        say(f"diagram left as DOT source ({exc}); {INSTALL_HINT}")
        diagram = dot_path
    return str(report), str(diagram)
