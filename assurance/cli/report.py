"""`bitcase report` and `bitcase diagram`: the HTML report and the trust-boundary diagram."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from assurance.cli._common import EXIT_FINDINGS, EXIT_USAGE, BitcaseError, DbOption, err_console, fail

CaseOption = Annotated[Path | None, typer.Option(
    "--case", help="Case file (.toml); default: the packaged determinism case.", dir_okay=False)]
ConfigOption = Annotated[str | None, typer.Option(
    "--config", help="Only this deployment configuration D (its digest or a unique prefix).")]
_UNSUPPORTED = ("defeated", "incomplete")
_DIAGRAM_FORMATS = (".svg", ".png", ".dot")


def report(
    out: Annotated[Path, typer.Option("--out", help="Directory to write report.html into (created if missing).",
                                      file_okay=False)],
    db: DbOption = None,
    case: CaseOption = None,
    config: ConfigOption = None,
    templates: Annotated[Path | None, typer.Option(
        "--templates", help="Directory of template overrides (use default:NAME to extend an original).",
        file_okay=False)] = None,
    no_diagram: Annotated[bool, typer.Option("--no-diagram", help="Leave the trust-boundary diagram out.")] = False,
) -> None:
    """Write one self-contained HTML report (OUT/report.html) and print its path.

    One section per deployment configuration in the store. Exits 1 when a top claim is not
    supported (defeated or incomplete) under some configuration, after writing the report.
    """
    from assurance.render.adapter import report_model
    from assurance.render.html import RenderOptions, write_report
    from assurance.render.loading import load_state

    try:
        state = load_state(db=db, case_path=case, config=config)
        model = report_model(state.evaluations, evidence=state.evidence, reviews=state.reviews,
                             store_ref=state.store_ref, case_ref=state.case_ref, case_digest=state.case_digest)
        if templates is not None and not templates.is_dir():
            raise BitcaseError(f"template directory {templates} does not exist",
                               hint="pass a directory holding your template overrides")
        path = write_report(model, out, RenderOptions(template_dir=templates, with_diagram=not no_diagram))
    except BitcaseError as exc:
        fail(str(exc), hint=exc.hint)
    unsupported = []
    for scope in model.scopes:
        for claim in scope.top_claims:
            status = next(n.status for n in scope.nodes if n.node_id == claim)
            err_console.print(f"{claim} under D {scope.deployment_digest[:19] or '(none)'}: {status}",
                              highlight=False, markup=False)
            if status in _UNSUPPORTED:
                unsupported.append(claim)
    typer.echo(str(path))
    if unsupported:
        raise typer.Exit(code=EXIT_FINDINGS)


def diagram(
    out: Annotated[Path, typer.Option("--out", help="Output file: .svg, .png or .dot.", dir_okay=False)],
    focus: Annotated[str | None, typer.Option("--focus", help="Draw only what this claim (node id) rests on.")] = None,
    db: DbOption = None,
    case: CaseOption = None,
    config: ConfigOption = None,
) -> None:
    """Draw the trust-boundary diagram: components by how they are assured, contracts as edges.

    SVG and PNG need Graphviz's `dot`; without it the DOT source is written next to OUT
    (same name, .dot) and the command exits 2 with how to install Graphviz.
    """
    from assurance.render.adapter import scope_model
    from assurance.render.diagram import UnknownNodeError, dot_source
    from assurance.render.graphviz import INSTALL_HINT, DotFailedError, DotMissingError, run_dot
    from assurance.render.loading import load_state

    suffix = out.suffix.lower()
    if suffix not in _DIAGRAM_FORMATS:
        fail(f"cannot tell the diagram format from {out.name!r}",
             hint="name the output file with .svg, .png or .dot")
    try:
        state = load_state(db=db, case_path=case, config=config)
        evaluation, fields = state.evaluations[-1]
        if len(state.evaluations) > 1:
            err_console.print(f"the store holds {len(state.evaluations)} deployment configurations; drawing the "
                              f"latest, {evaluation.deployment_digest} (choose one with --config)", highlight=False)
        scope = scope_model(evaluation, deployment_fields=fields, evidence=state.evidence, reviews=state.reviews)
        dot_text = dot_source(scope, focus=focus)
    except UnknownNodeError:
        ids = sorted(n.node_id for n in scope.nodes if n.kind in ("goal", "strategy"))
        fail(f"--focus {focus!r} is not a node of the case",
             hint="claims you can focus on: " + ", ".join(ids[:20]) + (" …" if len(ids) > 20 else ""))
    except BitcaseError as exc:
        fail(str(exc), hint=exc.hint)
    out.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".dot":
        out.write_text(dot_text, encoding="utf-8")
        typer.echo(str(out))
        return
    try:
        out.write_bytes(run_dot(dot_text, suffix[1:]))
    except DotMissingError:
        dot_path = out.with_suffix(".dot")
        dot_path.write_text(dot_text, encoding="utf-8")
        fail(f"Graphviz 'dot' is not installed, so {out.name} was not drawn; wrote the DOT source to {dot_path}",
             hint=f"{INSTALL_HINT}, then run this command again (or `dot -T{suffix[1:]} {dot_path}`)",
             code=EXIT_USAGE)
    except DotFailedError as exc:
        fail(str(exc), hint="the DOT source can be written with --out FILE.dot to inspect it")
    typer.echo(str(out))


def register(app: typer.Typer) -> None:
    """Add `report` and `diagram` to the main app."""
    app.command("report")(report)
    app.command("diagram")(diagram)
