"""`bitcase report` and `bitcase diagram`: the HTML report and the trust-boundary diagram."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from assurance.cli._case_options import CaseOption, PlanOption, RootOption, resolve_case_path, user_errors
from assurance.cli._aliases import deprecated_alias, either
from assurance.cli._common import EXIT_FINDINGS, EXIT_USAGE, DbOption, err_console, fail

ConfigOption = Annotated[str | None, typer.Option(
    "--config", metavar="DIGEST", help="Only this deployment configuration D: a digest or unique prefix, `latest` or `current` "
                     "(default: the case's or the project's pin, else every D in the store, each in its own section).")]
_UNSUPPORTED = ("defeated", "incomplete")
_DIAGRAM_FORMATS = (".svg", ".png", ".dot")


def report(
    out_dir: Annotated[Path | None, typer.Option(
        "--out-dir", metavar="DIR", help="Directory to write report.html into (created if missing).", file_okay=False,
        show_default=False)] = None,
    out: Annotated[Path | None, deprecated_alias("--out", "--out-dir", metavar="DIR", file_okay=False)] = None,
    db: DbOption = None,
    case: CaseOption = None,
    config: ConfigOption = None,
    plan: PlanOption = None,
    root: RootOption = None,
    templates: Annotated[Path | None, typer.Option(
        "--templates", metavar="DIR", help="Directory of template overrides (use default:NAME to extend an original).",
        file_okay=False)] = None,
    no_diagram: Annotated[bool, typer.Option("--no-diagram", help="Leave the trust-boundary diagram out.")] = False,
) -> None:
    """Write one self-contained HTML report (DIR/report.html) and print its path.

    One section per deployment configuration judged (--config, else the case's or the project's
    pin, else every D in the store). The store's hash chain is verified first: a broken chain
    exits 1 naming the first bad row and writes nothing. Exits 1 when a top claim is not
    supported (defeated or incomplete) under some configuration, after writing the report.
    """
    from assurance.export import tool_version
    from assurance.render.adapter import report_model
    from assurance.render.html import RenderOptions, write_report
    from assurance.render.loading import load_state

    with user_errors():
        out = either(out_dir, out, new="--out-dir", old="--out")
    if out is None:
        fail("missing option --out-dir DIR", hint="name the directory to write report.html into")
    if templates is not None and not templates.is_dir():
        fail(f"template directory {templates} does not exist", hint="pass a directory holding your template overrides")
    if out.exists() and not out.is_dir():
        fail(f"--out-dir {out} is a file", hint="pass a directory; the report is written as DIR/report.html")
    with user_errors():
        state = load_state(db=db, case_path=resolve_case_path(case, db), config=config, plan=plan, root=root)
        model = report_model([(s.evaluation, s.fields, s.notes) for s in state.scopes], evidence=state.evidence,
                             reviews=state.reviews, store_ref=state.store_ref, case_ref=state.case_ref,
                             case_digest=state.case_digest, chain=state.chain, tool_version=tool_version())
    err_console.print(f"D: {state.chosen_because}", highlight=False, markup=False, soft_wrap=True)
    err_console.print(model.chain_summary, highlight=False, markup=False, soft_wrap=True)
    try:
        path = write_report(model, out, RenderOptions(template_dir=templates, with_diagram=not no_diagram))
    except OSError as exc:
        fail(f"cannot write the report into {out}: {exc.strerror or exc}", hint="pass a writable directory")
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
    out: Annotated[Path, typer.Option("--out", metavar="FILE", help="Output file: .svg, .png or .dot.", dir_okay=False)],
    focus: Annotated[str | None, typer.Option("--focus", metavar="NODE", help="Draw only what this claim (node id) rests on.")] = None,
    db: DbOption = None,
    case: CaseOption = None,
    config: ConfigOption = None,
    plan: PlanOption = None,
    root: RootOption = None,
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
    from assurance.pinning import case_pin, project_pin
    from evidence_db.atomic import write_atomic
    from assurance.settings import load_settings

    with user_errors():
        case_path = resolve_case_path(case, db)
        pin = None if config else (case_pin(case_path) or project_pin(load_settings(db=db).home))
        state = load_state(db=db, case_path=case_path, config=config or (pin.spec if pin else "latest"), plan=plan,
                           root=root)
    chosen = state.scopes[0]
    why = state.chosen_because if config or pin else "no --config and nothing pinned: `latest`, the newest in the store"
    err_console.print(f"drawing under D {chosen.evaluation.deployment_digest} ({why})", highlight=False,
                      markup=False, soft_wrap=True)
    scope = scope_model(chosen.evaluation, deployment_fields=chosen.fields, evidence=state.evidence,
                        reviews=state.reviews, notes=chosen.notes)
    try:
        dot_text = dot_source(scope, focus=focus)
    except UnknownNodeError:
        ids = sorted(n.node_id for n in scope.nodes if n.kind in ("goal", "strategy"))
        fail(f"--focus {focus!r} is not a node of the case",
             hint="claims you can focus on: " + ", ".join(ids[:20]) + (" …" if len(ids) > 20 else ""))
    try:
        write_atomic(out, dot_text.encode("utf-8") if suffix == ".dot" else run_dot(dot_text, suffix[1:]))
    except OSError as exc:
        fail(f"cannot write {out}: {exc.strerror or exc}", hint="pass a path in a writable directory")
    except DotMissingError:
        dot_path = out.with_suffix(".dot")
        write_atomic(dot_path, dot_text.encode("utf-8"))
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
