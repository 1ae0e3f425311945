"""`bitcase review` (audit reviews of trusted items and evidence) and `bitcase audit diff`."""

from __future__ import annotations

import json
import re
from datetime import date, datetime, timezone
from enum import Enum
from typing import Annotated

import typer

from assurance.cli._case_options import CaseOption, PlanOption, resolve_case_path, user_errors
from assurance.cli._aliases import deprecated_alias, either
from assurance.cli._common import EXIT_FINDINGS, BitcaseError, DbOption, JsonOption, PipeWideConsole, err_console
from assurance.cli._signing import load_signing_key

review_app = typer.Typer(help="Audit reviews of trusted items and evidence (append-only, digest-pinned).",
                         no_args_is_help=True)

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class Decision(str, Enum):
    accept = "accept"
    reject = "reject"
    needs_work = "needs-work"


def _parse_expires(text: str | None) -> date | None:
    if text is None:
        return None
    try:
        if not _DATE.match(text):
            raise ValueError(text)
        day = date.fromisoformat(text)
    except ValueError:
        raise BitcaseError(f"--expires {text!r} is not a date", hint="write it as YYYY-MM-DD, e.g. 2027-06-30") from None
    if day < datetime.now(timezone.utc).date():
        raise BitcaseError(f"--expires {text} is in the past", hint="give the last day the review should count")
    return day


@review_app.command("add")
def add(
    item: Annotated[str, typer.Argument(metavar="ITEM", help="A trusted item's case node id, or an evidence item id.")],
    decision: Annotated[Decision, typer.Option("--decision", help="accept, reject or needs-work.")],
    rationale: Annotated[str, typer.Option("--rationale", metavar="RATIONALE", help="Why: what was checked and how.")],
    by: Annotated[str | None, typer.Option("--by", metavar="NAME", help="Who reviewed it (name or handle), for an unsigned review.")]
    = None,
    sign_key: Annotated[str | None, typer.Option(
        "--sign-key", metavar="KEY", help="Sign the review with this key (a key id, a key name or a private key file); "
                                     "the reviewer is then the key's identity.")] = None,
    key: Annotated[str | None, deprecated_alias("--key", "--sign-key", metavar="KEY")] = None,
    expires: Annotated[str | None, typer.Option("--expires", metavar="YYYY-MM-DD", help="Last day the review counts (YYYY-MM-DD).")] = None,
    db: DbOption = None,
    case: CaseOption = None,
    json_out: JsonOption = False,
) -> None:
    """Record an audit review of ITEM, pinned to the digest ITEM has now.

    Editing a trusted item's text or rationale, or re-producing an evidence item with other
    content, makes the review stale. Reviews are appended to the store's hash chain, never edited.
    Give --sign-key to sign it (the reviewer is the key's identity) or --by for an unsigned review.
    """
    from assurance.render.review_targets import resolve_target
    from evidence_db.reviews import add_review, signer_identity
    from evidence_db.session import open_session

    with user_errors():
        signer = _review_signer(either(sign_key, key, new="--sign-key", old="--key"), by)
        expires_on = _parse_expires(expires)
        target = resolve_target(item, db=db, case_path=resolve_case_path(case, db))
        with open_session(db, write=True) as session:
            view = add_review(session=session, target=item, target_digest=target.digest, decision=decision.value,
                              reviewer=by if signer is None else signer_identity(signer), rationale=rationale,
                              expires=expires_on, signer=signer)
    err_console.print(f"recorded review {view.seq}: {view.decision} {target.kind} {item} "
                      f"(pinned to {target.digest})", highlight=False, markup=False)
    record = {"seq": view.seq, "target": view.target, "target_kind": target.kind,
              "target_digest": view.target_digest, "decision": view.decision, "reviewer": view.reviewer,
              "rationale": view.rationale, "created_at": view.created_at,
              "expires": view.expires.isoformat() if view.expires else None, "signed_by": view.signer_key_id}
    typer.echo(json.dumps(record, sort_keys=True) if json_out else f"{view.seq}\t{view.decision}\t{view.target}")


def _review_signer(key: str | None, by: str | None):
    """The key a review is signed with (None: unsigned, by ``by``); exactly one of the two is given."""
    if key is None:
        if by is None:
            raise BitcaseError("say who reviewed: --sign-key KEY (signed) or --by NAME (unsigned)",
                               hint="create a key with `bitcase key generate --name NAME`")
        return None
    if by is not None:
        raise BitcaseError("--by and --sign-key cannot be combined: a signed review is by the key's identity",
                           hint="drop --by")
    return load_signing_key(key)


@review_app.command("list")
def list_(
    db: DbOption = None,
    case: CaseOption = None,
    target: Annotated[str | None, typer.Option("--target", metavar="ITEM", help="Only reviews of this item.")] = None,
    json_out: JsonOption = False,
) -> None:
    """List every audit review in the order recorded: pinned to the current digest or not, signed or not.

    A signed review shows its key and the identity the key is trusted as (`bitcase key trust`),
    or that the key is not trusted; an unsigned review's reviewer is only what --by said.
    """
    from rich.table import Table
    from rich.text import Text

    from assurance.render.review_targets import current_digests
    from evidence_db.keyring import keyring_from_env
    from evidence_db.reviews import list_reviews
    from evidence_db.session import open_session

    with user_errors():
        trusted = keyring_from_env().trusted()
        with open_session(db) as session:
            reviews = list_reviews(session=session)
        digests = current_digests(db=db, case_path=resolve_case_path(case, db))
    rows = [r for r in reviews if target is None or r.target == target]
    records = [{"seq": r.seq, "target": r.target, "decision": r.decision, "reviewer": r.reviewer,
                "rationale": r.rationale, "created_at": r.created_at, "target_digest": r.target_digest,
                "expires": r.expires.isoformat() if r.expires else None,
                "pinned_to_current": (digests[r.target] == r.target_digest) if r.target in digests else None,
                "signed_by": r.signer_key_id,
                "trusted_as": None if r.signer_key_id is None else trusted.name_of(r.signer_key_id)}
               for r in rows]
    if json_out:
        typer.echo(json.dumps(records, sort_keys=True, indent=2))
        return
    if not records:
        err_console.print("no reviews recorded")
        return
    table = Table()
    for name in ("seq", "target", "decision", "reviewer", "signed", "recorded", "expires", "pinned", "rationale"):
        short = name in ("seq", "decision", "recorded", "expires", "pinned")
        table.add_column(name, no_wrap=short, overflow="fold")  # fold, never cut: ids must stay whole
    for rec in records:
        pinned = {True: "current", False: "stale", None: "unknown item"}[rec["pinned_to_current"]]
        signed = ("unsigned" if rec["signed_by"] is None else
                  f"{rec['signed_by']} " + ("(trusted)" if rec["trusted_as"] is not None else "(key NOT trusted)"))
        cells = (str(rec["seq"]), rec["target"], rec["decision"], rec["reviewer"], signed, rec["created_at"][:10],
                 rec["expires"] or "", pinned, rec["rationale"][:80])
        table.add_row(*(Text(cell) for cell in cells))  # Text: brackets in a rationale are not markup
    PipeWideConsole(soft_wrap=False, markup=False).print(table)


def diff(
    a: Annotated[str, typer.Argument(metavar="BEFORE", help="Before: a store (URL or SQLite file) or an exported JSON snapshot.")],
    b: Annotated[str, typer.Argument(metavar="AFTER", help="After: a store (URL or SQLite file) or an exported JSON snapshot.")],
    case: CaseOption = None,
    plan: PlanOption = None,
    json_out: JsonOption = False,
) -> None:
    """Compare two stores or snapshots: changed statuses, evidence added/removed, trusted base.

    Exits 1 when anything differs and 0 when they are identical. A store is evaluated with
    the case (--case, default as for `bitcase status`) under every D it holds.
    """
    from assurance.render.diff import diff_snapshots
    from assurance.render.snapshot import load_snapshot

    with user_errors():
        result = diff_snapshots(load_snapshot(a, case_path=case, plan=plan), load_snapshot(b, case_path=case, plan=plan))
    if json_out:
        typer.echo(json.dumps(result.to_json(), sort_keys=True, indent=2))
    else:
        for c in result.status_changes:
            typer.echo(f"status\t{_short(c.deployment)}\t{c.node_id}\t{c.before or '(absent)'} -> {c.after or '(absent)'}")
        for label, ids in (("evidence+", result.evidence_added), ("evidence-", result.evidence_removed),
                           ("evidence~", result.evidence_changed)):
            for item_id in ids:
                typer.echo(f"{label}\t{item_id}")
        for label, pairs in (("trusted+", result.trusted_added), ("trusted-", result.trusted_removed)):
            for deployment, node_id in pairs:
                typer.echo(f"{label}\t{_short(deployment)}\t{node_id}")
        for rc in result.review_changes:
            label = {"added": "review+", "removed": "review-", "changed": "review~"}[rc.change]
            shown = {"added": [rc.after], "removed": [rc.before], "changed": [rc.before, rc.after]}[rc.change]
            typer.echo(f"{label}\t{_short(rc.deployment)}\t{rc.node_id}\t" + " -> ".join(map(_review_text, shown)))
        err_console.print("identical" if result.is_empty else
                          f"{len(result.status_changes)} status changes, {len(result.evidence_added)} evidence "
                          f"added, {len(result.evidence_removed)} removed, {len(result.evidence_changed)} changed, "
                          f"{len(result.review_changes)} review changes, "
                          f"trusted base +{len(result.trusted_added)}/-{len(result.trusted_removed)}",
                          highlight=False)
    if not result.is_empty:
        raise typer.Exit(code=EXIT_FINDINGS)


def _short(deployment: str) -> str:
    """A D digest cut to its algorithm and first 12 hex digits (both of a cross-D pair)."""
    return "→".join(d[:19] for d in deployment.split("→"))


def _review_text(review: dict[str, object]) -> str:
    """A review in one line: decision, who, when, why."""
    if not review.get("decision"):
        return str(review.get("state") or "unreviewed")
    rationale = " ".join(str(review.get("rationale") or "").split())
    return (f"{review['decision']} by {review.get('reviewer')} on {str(review.get('created_at') or '')[:10]}"
            + (f": {rationale}" if rationale else ""))


def register(app: typer.Typer) -> None:
    """Add the `review` group, and `diff` to the `audit` group."""
    from assurance.cli.audit import audit_app  # the evidence store's `audit` group

    app.add_typer(review_app, name="review")
    audit_app.command("diff")(diff)
