"""`bitcase case ...`: check a case file, list the obligations producers can target, export its graph."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from assurance.cli._case_options import PlanOption, emit_json, report_case_errors, user_errors
from assurance.cli._common import EXIT_USAGE, JsonOption, err_console, fail

case_app = typer.Typer(help="Check assurance case files and list their obligations.", no_args_is_help=True)

CaseFile = Annotated[Path, typer.Argument(metavar="FILE", help="The case TOML file.", dir_okay=False)]


def _expanded(file: Path, plan: str | None):
    from assurance.case_loader import load_case
    from assurance.generators import expand_case
    from assurance.plan_source import preset_items

    case = load_case(file)
    return case, expand_case(case, preset_items(plan), label=f"preset plan {plan}") if plan else None


@case_app.command("validate")
def validate(file: CaseFile, plan: PlanOption = None, json_out: JsonOption = False) -> None:
    """Check a case file: ids, edges, cycles, unreachable nodes, top goals, development, policies and categories.

    Exit 0 when valid; exit 2 with every problem (file, line, node, fix) otherwise. Without
    --plan, node generators are checked on a sample plan entry.
    """
    from assurance.issues import CaseError
    from assurance.plan_source import PlanUnavailable
    from assurance.validate import validate_case

    try:
        case, expanded = _expanded(file, plan)
        issues = _with_graph_issues(expanded or case, validate_case(expanded or case))
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


def _with_graph_issues(case, issues):
    """Every cycle (the domain check stops at the first) and every node no top claim reaches."""
    from assurance.graph_nx import MAX_CYCLES, cycles, unreachable
    from assurance.issues import Issue

    found = cycles(case)
    if not found:
        return issues
    out = [i for i in issues if i.code != "cycle"]
    for cycle in found:
        node = case.node(cycle[0])
        out.append(Issue("cycle", case.location, node.id, f"cycle: {' -> '.join(cycle + [cycle[0]])}",
                         "remove one of the supported_by/in_context_of links on the cycle", node.line))
    if len(found) >= MAX_CYCLES:
        out.append(Issue("cycle", case.location, None, f"more cycles than the {MAX_CYCLES} listed may exist",
                         "fix these and validate again"))
    for node_id in unreachable(case):
        node = case.node(node_id)
        out.append(Issue("unreachable", case.location, node.id,
                         "no top claim reaches this node (it hangs off a cycle)",
                         "break the cycle and attach the node under a goal", node.line))
    return sorted(out, key=lambda i: (i.line, i.node or "", i.code, i.message))


class GraphFormat(str, Enum):
    graphml = "graphml"
    node_link = "node-link"


@case_app.command("export")
def export_graph(
    file: CaseFile,
    format: Annotated[GraphFormat, typer.Option(
        "--format", help="graphml (yEd, Gephi, Cytoscape) or node-link (networkx/d3 JSON).")] = GraphFormat.graphml,
    plan: PlanOption = None,
    out: Annotated[Path | None, typer.Option("--out", metavar="FILE", dir_okay=False,
                                             help="Write to this file instead of stdout.")] = None,
) -> None:
    """Export the case's graph (nodes with their fields, support and context edges) for other tools."""
    from assurance.graph_nx import graphml_text, node_link_text

    with user_errors():
        case, expanded = _expanded(file, plan)
    text = graphml_text(expanded or case) if format is GraphFormat.graphml else node_link_text(expanded or case)
    if out is None:
        typer.echo(text, nl=False)
        return
    out.write_text(text, encoding="utf-8")
    err_console.print(f"wrote {out}", highlight=False, soft_wrap=True)


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
        trusted = "  (trusted)" if r["trusted"] and policy != "trusted" else ""
        typer.echo(f"{r['obligation']}\t{policy}{trusted}\tsubjects: {', '.join(r['subjects']) or '(none)'}")
    if case.generators and expanded is None:
        err_console.print("note: plan-generated obligations (kernel.<key>.contract) are listed with --plan PRESET",
                          highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add the `case` group to the main app."""
    app.add_typer(case_app, name="case")
