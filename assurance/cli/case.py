"""`bitcase case ...`: check a case file and list the obligations producers can target."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from assurance.cli._case_options import PlanOption, emit_json, report_case_errors, user_errors
from assurance.cli._common import EXIT_USAGE, JsonOption, err_console, fail

case_app = typer.Typer(help="Check assurance case files and list their obligations.", no_args_is_help=True)

CaseFile = Annotated[Path, typer.Argument(help="The case TOML file.", dir_okay=False)]


def _expanded(file: Path, plan: str | None):
    from assurance.case_loader import load_case
    from assurance.generators import expand_case
    from assurance.plan_source import preset_items

    case = load_case(file)
    return case, expand_case(case, preset_items(plan), label=f"preset plan {plan}") if plan else None


@case_app.command("validate")
def validate(file: CaseFile, plan: PlanOption = None, json_out: JsonOption = False) -> None:
    """Check a case file: ids, edges, cycles, top goals, development, policies and categories.

    Exit 0 when valid; exit 2 with every problem (file, line, node, fix) otherwise. Without
    --plan, node generators are checked on a sample plan entry.
    """
    from assurance.issues import CaseError
    from assurance.plan_source import PlanUnavailable
    from assurance.validate import validate_case

    try:
        case, expanded = _expanded(file, plan)
        issues = validate_case(expanded or case)
    except CaseError as exc:
        issues = exc.issues
    except PlanUnavailable as exc:
        fail(str(exc), hint=exc.hint or "check the preset name (kernels/shapes.py) and that its kernels exist")
    if json_out:
        emit_json({"file": str(file), "valid": not issues, "issues": [i.to_json() for i in issues]})
    elif issues:
        report_case_errors(CaseError(issues))
    else:
        typer.echo(f"{file}: valid")
    if issues:
        err_console.print(f"{file}: {len(issues)} problem(s)", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_USAGE)


@case_app.command("obligations")
def obligations(file: CaseFile, plan: PlanOption = None, json_out: JsonOption = False) -> None:
    """List every obligation id of a case with its solution, accepted categories and subjects."""
    with user_errors():
        case, expanded = _expanded(file, plan)
    rows = []
    for node in (expanded or case).nodes:
        if node.kind != "solution":
            continue
        for obligation in node.obligations:
            rows.append({"obligation": obligation, "node": node.id, "requires": list(node.requires),
                         "any_of": list(node.any_of), "trusted": node.is_trusted, "subjects": list(node.subjects),
                         "generated_by": node.generated_by})
    rows.sort(key=lambda r: r["obligation"])
    if json_out:
        emit_json(rows)
        return
    for r in rows:
        policy = " + ".join(r["requires"]) or " | ".join(r["any_of"]) or "trusted"
        if r["requires"] and r["any_of"]:
            policy += " + one of " + " | ".join(r["any_of"])
        typer.echo(f"{r['obligation']}\t{policy}{'  (trusted)' if r['trusted'] and policy != 'trusted' else ''}")
    if case.generators and expanded is None:
        err_console.print("note: plan-generated obligations (kernel.<key>.contract) are listed with --plan PRESET",
                          highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add the `case` group to the main app."""
    app.add_typer(case_app, name="case")
