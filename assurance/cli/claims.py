"""`bitcase init|status|check|trusted-base|whatif|export`: the derived status of the assurance case."""

from __future__ import annotations

import json
import shutil
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from assurance.cli._case_options import CaseOption, ConfigOption, PlanOption, RootOption, emit_json, user_errors
from assurance.cli._judged import judged, judged_json
from assurance.cli._common import EXIT_FINDINGS, DbOption, JsonOption, err_console, fail, out_console

GoalOption = Annotated[
    list[str] | None,
    typer.Option("--goal", metavar="NODE", help="Top claim to gate or inspect (repeatable; default: the case's primary claim)."),
]


def _goals(evaluation, goals: list[str] | None) -> list[str]:
    for goal in goals or ():
        if goal not in evaluation.nodes or not evaluation.node(goal).is_claim:
            fail(f"--goal {goal} is not a goal of case {evaluation.case.id}",
                 hint="top goals: " + ", ".join(evaluation.tops))
    return list(goals or [evaluation.top])


def init(db: DbOption = None, force: Annotated[bool, typer.Option("--force", help="Overwrite an existing case copy.")] = False,
         json_out: JsonOption = False) -> None:
    """Create (or upgrade) the evidence store and copy the bundled case to .bitcase/case.toml for editing.

    The copy goes to $BITCASE_HOME/case.toml (default .bitcase/case.toml), where the claim commands
    look for a case when --case and $BITCASE_CASE are not given; it keeps judging bitcase's own
    code (its `root` names the installed tree). Also writes the project file pinning the D the
    claim commands judge (`current`, .bitcase/project.toml), unless one exists.
    """
    from assurance.scope import BUNDLED_CASE
    from assurance.settings import load_settings
    from evidence_db.migrate import ensure_store
    from evidence_db.session import store_label

    from assurance.pinning import write_project_pin

    settings = load_settings(db=db)
    with user_errors():
        ensure_store(settings.db_url)
    project = write_project_pin(settings.home, "current")
    target = settings.home / "case.toml"
    copied = force or not target.exists()
    if copied:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(BUNDLED_CASE, target)
    if json_out:
        emit_json({"store": store_label(settings.db_url), "case": str(target), "case_copied": copied,
                   "project": str(project)})
        return
    typer.echo(f"store: {store_label(settings.db_url)}")
    typer.echo(f"case: {target}")
    typer.echo(f"project: {project}")
    if not copied:
        err_console.print(f"{target} already exists and was kept (use --force to replace it)", highlight=False, soft_wrap=True)


def status(case: CaseOption = None, config: ConfigOption = None, plan: PlanOption = None, db: DbOption = None,
           root: RootOption = None, json_out: JsonOption = False,
           show_all: Annotated[bool, typer.Option("--all", help="Also show nodes that do not apply under D.")] = False,
           ) -> None:
    """Show every claim's derived status under D: a tree for people, or JSON (--json) for machines.

    Exit 1 when the primary claim is not supported (supported under trust counts as supported);
    `bitcase check` is the stricter gate.
    """
    from assurance.scope import paused_gc
    from assurance.tree_view import status_tree, unclaimed_note
    from assurance.trusted import SUPPORTED

    result = judged(case, config, plan, db, json_out=json_out, root=root)
    evaluation = result.evaluation
    if json_out:
        with paused_gc():
            emit_json({**evaluation.to_json(), "judged": judged_json(result)}, compact=True)
    else:
        for tree in status_tree(evaluation, show_not_applicable=show_all):
            out_console.print(tree)
        counts = ", ".join(f"{n} {s}" for s, n in evaluation.counts().items())
        err_console.print(f"{len(evaluation.nodes)} nodes: {counts}", highlight=False, soft_wrap=True)
        if (note := unclaimed_note(evaluation)) is not None:
            err_console.print(f"[yellow]warning:[/] {escape(note)}", highlight=False, soft_wrap=True)
    if evaluation.node(evaluation.top).status not in SUPPORTED:
        raise typer.Exit(EXIT_FINDINGS)


def check(case: CaseOption = None, config: ConfigOption = None, plan: PlanOption = None, db: DbOption = None,
          root: RootOption = None, goal: GoalOption = None, json_out: JsonOption = False,
          accept_unreviewed: Annotated[bool, typer.Option(
              "--accept-unreviewed", help="Accept trusted items without a current accepted review "
                                          "(a rejected or needs-work review still fails).")] = False) -> None:
    """CI gate: exit 0 only when the claim is supported and nothing it rests on is stale, failed or missing.

    Exit 1 lists the reasons; trusted items need an accepted, current review unless
    --accept-unreviewed (which lists what it waived). D is --config, else the case's or the
    project's pin, else `current` for the bundled case; a broken hash chain fails the gate.
    """
    from assurance.gate import gate, waived

    result = judged(case, config, plan, db, json_out=json_out, root=root)
    evaluation = result.evaluation
    goals = _goals(evaluation, goal)
    findings = gate(evaluation, goals=goals, accept_unreviewed=accept_unreviewed)
    waivers = waived(evaluation, goals=goals) if accept_unreviewed else []
    if json_out:
        emit_json({"passed": not findings, "deployment_digest": evaluation.deployment_digest,
                   "goals": [{"id": g, "status": evaluation.node(g).status} for g in goals],
                   "findings": [f.to_json() for f in findings], "waived": [w.to_json() for w in waivers],
                   "judged": judged_json(result)})
    else:
        for f in findings:
            typer.echo(f"{f.node}\t{f.status}\t{f.message}")
        for w in waivers:
            err_console.print(f"waived by --accept-unreviewed: {w.node} ({w.message})", highlight=False,
                              soft_wrap=True, markup=False)
        verdict = "PASS" if not findings else f"FAIL ({len(findings)} finding(s))"
        err_console.print(f"check {', '.join(goals)}: {verdict}", highlight=False, soft_wrap=True)
    if findings:
        raise typer.Exit(EXIT_FINDINGS)


def trusted_base_cmd(case: CaseOption = None, config: ConfigOption = None, plan: PlanOption = None,
                     db: DbOption = None, root: RootOption = None, goal: GoalOption = None,
                     json_out: JsonOption = False) -> None:
    """List every trusted item the claim rests on, with its rationale and review state."""
    from assurance.trusted import trusted_base

    result = judged(case, config, plan, db, json_out=json_out, root=root)
    evaluation = result.evaluation
    rows = []
    for g in _goals(evaluation, goal):
        for r in trusted_base(evaluation, g):
            review = r.review.to_json() if r.review else None
            rows.append({"goal": g, "id": r.id, "text": r.text, "source": r.source, "status": r.status,
                         "rationale": r.rationale, "review": review})
    if json_out:
        emit_json({"items": rows, "judged": judged_json(result)})
        return
    for row in rows:
        state = row["review"]["state"] if row["review"] else "unreviewed"
        rationale = " ".join((row["rationale"] or "").split()) or "(no rationale given)"
        typer.echo(f"{row['id']}\t{state}\t{' '.join(row['text'].split())}\trationale: {rationale}")
    err_console.print(f"{len(rows)} trusted item(s); review pins: the digest of each item's text and rationale",
                      highlight=False, soft_wrap=True)


def whatif_cmd(distrust: Annotated[list[str], typer.Option(
                   "--distrust", metavar="ID[,ID...]", help="Solution id to distrust (repeat the option, or separate ids with commas).")],
               case: CaseOption = None, config: ConfigOption = None, plan: PlanOption = None,
               db: DbOption = None, root: RootOption = None, json_out: JsonOption = False) -> None:
    """List the claims that lose support if the given items are distrusted.

    Exit 1 when the primary claim loses support, as `bitcase check` fails.
    """
    from assurance.trusted import whatif

    result = judged(case, config, plan, db, json_out=json_out, root=root)
    evaluation = result.evaluation
    try:
        outcome = whatif(evaluation, [i.strip() for value in distrust for i in value.split(",") if i.strip()])
    except (KeyError, ValueError) as exc:
        fail(str(exc).strip("'\""), hint="trusted items: see `bitcase trusted-base`")
    top_loses = any(c.id == evaluation.top for c in outcome.lost)
    if json_out:
        emit_json({**outcome.to_json(), "top": evaluation.top, "top_loses_support": top_loses,
                   "judged": judged_json(result)})
    else:
        for change in outcome.lost:
            typer.echo(f"{change.id}\t{change.before} -> {change.after}")
        err_console.print(f"{len(outcome.lost)} claim(s) lose support without {', '.join(outcome.distrusted)}",
                          highlight=False, soft_wrap=True)
    if top_loses:
        raise typer.Exit(EXIT_FINDINGS)


class ExportFormat(str, Enum):
    json = "json"
    sarif = "sarif"


def export(format: Annotated[ExportFormat, typer.Option("--format", help="json (the status document) or sarif (2.1.0).")] = ExportFormat.json,
           out: Annotated[Path | None, typer.Option("--out", metavar="FILE", help="Write to this file instead of stdout.", dir_okay=False)] = None,
           case: CaseOption = None, config: ConfigOption = None, plan: PlanOption = None, db: DbOption = None,
           root: RootOption = None) -> None:
    """Export the evaluated case as JSON, or SARIF 2.1.0 of failing, stale and missing obligations."""
    from assurance.export import to_sarif
    from assurance.scope import paused_gc

    result = judged(case, config, plan, db, json_out=False, root=root)
    evaluation = result.evaluation
    with paused_gc():
        if format is ExportFormat.sarif:
            document = to_sarif(evaluation)
            document["runs"][0]["properties"]["judged"] = judged_json(result)
        else:
            document = {**evaluation.to_json(), "judged": judged_json(result)}
        text = json.dumps(document, sort_keys=True, ensure_ascii=False) + "\n"  # compact: C encoder, large cases
    if out is None:
        typer.echo(text, nl=False)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    err_console.print(f"wrote {out}", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add the claim commands to the main app."""
    app.command("init")(init)
    app.command("status")(status)
    app.command("check")(check)
    app.command("trusted-base")(trusted_base_cmd)
    app.command("whatif")(whatif_cmd)
    app.command("export")(export)
