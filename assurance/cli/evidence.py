"""`bitcase evidence list|show`: find stored evidence items and read one in full.

Both read through the verified hash chain (:func:`evidence_db.verified_read.read_verified`), as
the claim commands do: a broken chain exits 1 naming the first bad row, and no item is shown
from a store whose chain does not verify.
"""

from __future__ import annotations

import difflib
import fnmatch
from typing import Annotated, Any, Literal, Optional

import typer

from assurance.cli._case_options import emit_json
from assurance.cli._common import EXIT_FINDINGS, BitcaseError, DbOption, JsonOption, err_console
from assurance.cli.db import store_errors
from evidence_db.bundle import CATEGORIES, STATUSES

evidence_app = typer.Typer(help="Find stored evidence items and read one in full (through the verified chain).",
                           no_args_is_help=True)


def _read(db: str | None, *, json_out: bool, with_details: bool) -> tuple[Any, list[Any], dict[str, str]]:
    """The verified store, its deployments and the trusted signers' names; exit 1 on a broken chain."""
    from evidence_db.keyring import keyring_from_env
    from evidence_db.session import open_session
    from evidence_db.store import list_deployments
    from evidence_db.verified_read import chain_summary, read_verified

    with store_errors():
        trusted = keyring_from_env().trusted()
        with open_session(db) as session, err_console.status("verifying the hash chain…"):
            store = read_verified(session=session, with_details=with_details)
            deployments = list_deployments(session=session)
            signers = _signers(session, store) if store.chain.is_intact else {}
    summary = chain_summary(store.chain_json())
    if not store.chain.is_intact:
        err_console.print(f"error: nothing is shown from this store: {summary}", style="red", highlight=False,
                          soft_wrap=True, markup=False)
        if json_out:
            emit_json({"chain": store.chain_json(), "items": None})
        raise typer.Exit(EXIT_FINDINGS)
    err_console.print(summary, highlight=False, soft_wrap=True, markup=False)
    return store, deployments, {seq: (key, name, trusted.name_of(key)) for seq, (key, name) in signers.items()}


def _signers(session: Any, store: Any) -> dict[int, tuple[str, str]]:
    from evidence_db.signatures import evidence_signers

    return evidence_signers(session=session, evidence_seqs=[e.seq for e in store.evidence])


def _signer_json(signer: tuple[str, str, str | None] | None) -> dict[str, Any] | None:
    if signer is None:
        return None
    key_id, name, trusted_as = signer
    return {"key_id": key_id, "signed_as": name, "trusted_as": trusted_as}


def _row(item: Any, signer: tuple[str, str, str | None] | None) -> dict[str, Any]:
    return {"id": item.item_id, "seq": item.seq, "category": item.category, "obligation": item.obligation,
            "status": item.status, "summary": item.summary, "deployment_digest": item.deployment_digest,
            "produced_at": item.produced_at, "content_digest": item.content_digest,
            "producer": {"tool": item.producer_tool, "version": item.producer_version},
            "signer": _signer_json(signer)}


@evidence_app.command("list")
def list_(
    obligation: Annotated[Optional[str], typer.Option(
        "--obligation", metavar="GLOB", help="Only items of obligations matching this id or glob (e.g. 'kernel.*').")]
    = None,
    category: Annotated[Optional[Literal[CATEGORIES]], typer.Option("--category", help="Only items of this category.")]
    = None,
    config: Annotated[Optional[str], typer.Option(
        "--config", metavar="DIGEST", help="Only items produced under this D: a digest or unique prefix, or `latest` "
                                           "(default: every D in the store).")] = None,
    status: Annotated[Optional[Literal[STATUSES]], typer.Option("--status", help="Only items with this result.")]
    = None,
    limit: Annotated[Optional[int], typer.Option(
        "--limit", metavar="N", min=1, help="Show at most N items (default: all).")] = None,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """List stored evidence items, sorted by obligation then id: id, result, category, obligation, D, time.

    Plain output is one tab-separated line per item; --json gives each item's digests, producer and
    signer too. `bitcase evidence show ID` prints one item in full.
    """
    from assurance.scope import choose_deployment

    store, deployments, signers = _read(db, json_out=json_out, with_details=False)
    digest = None
    if config is not None:
        with store_errors():
            digest = choose_deployment(config, deployments).digest
    items = sorted((e for e in store.evidence
                    if (obligation is None or fnmatch.fnmatchcase(e.obligation, obligation))
                    and (category is None or e.category == category) and (status is None or e.status == status)
                    and (digest is None or e.deployment_digest == digest)),
                   key=lambda e: (e.obligation, e.item_id))
    shown = items[:limit] if limit is not None else items
    if json_out:
        emit_json({"items": [_row(e, signers.get(e.seq)) for e in shown], "matched": len(items),
                   "chain": store.chain_json()})
    else:
        for e in shown:
            typer.echo(f"{e.item_id}\t{e.status}\t{e.category}\t{e.obligation}\t{e.deployment_digest[:19]}\t"
                       f"{e.produced_at}")
    more = f" (first {len(shown)} shown; raise --limit for more)" if len(shown) < len(items) else ""
    err_console.print(f"{len(items)} of {len(store.evidence)} stored item(s) match{more}", highlight=False,
                      soft_wrap=True, markup=False)


@evidence_app.command("show")
def show(
    item_id: Annotated[str, typer.Argument(metavar="ID", help="The evidence item's id (as `bitcase evidence list` "
                                                             "prints it).", show_default=False)],
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Print one evidence item in full: result, summary, digests, chain seq, producer, subjects, details, signer, reviews.

    Exit 2 naming close matches when no item has this id.
    """
    store, _deployments, signers = _read(db, json_out=json_out, with_details=True)
    item = next((e for e in store.evidence if e.item_id == item_id), None)
    if item is None:
        with store_errors():
            raise BitcaseError(f"no evidence item {item_id!r} in the store", hint=_close_hint(item_id, store.evidence))
    reviews = [{"seq": r.seq, "decision": r.decision, "reviewer": r.reviewer, "rationale": r.rationale,
                "created_at": r.created_at, "expires": r.expires.isoformat() if r.expires else None,
                "pinned_to_current": r.target_digest == item.content_digest, "signed_by": r.signer_key_id}
               for r in store.reviews if r.target == item.item_id]
    record = {**_row(item, signers.get(item.seq)), "subjects": [{"uri": s.uri, "sha256": s.sha256}
                                                                for s in item.subjects],
              "details": item.details, "reviews": reviews}
    if json_out:
        emit_json(record)
        return
    _print_item(record)


def _close_hint(item_id: str, evidence: list[Any]) -> str:
    """Ids starting with what was given, else the most similar ones, else how to list them."""
    ids = sorted(e.item_id for e in evidence)
    close = [i for i in ids if i.startswith(item_id)][:5] or difflib.get_close_matches(item_id, ids, n=5)
    listing = "list the stored ids with `bitcase evidence list`"
    return f"did you mean {', '.join(close)}? ({listing})" if close else listing


def _print_item(record: dict[str, Any]) -> None:
    import json

    signer = record["signer"]
    signed = ("unsigned" if signer is None else
              f"{signer['key_id']} as {signer['signed_as']} "
              + (f"(trusted as {signer['trusted_as']})" if signer["trusted_as"] else "(key NOT trusted)"))
    for label, value in (("id", record["id"]), ("result", record["status"]), ("category", record["category"]),
                         ("obligation", record["obligation"]), ("summary", record["summary"]),
                         ("D", record["deployment_digest"]), ("produced", record["produced_at"]),
                         ("producer", f"{record['producer']['tool']} {record['producer']['version']}".strip()),
                         ("chain seq", record["seq"]), ("content", record["content_digest"]), ("signed", signed)):
        typer.echo(f"{label}:\t{value}")
    for s in record["subjects"]:
        typer.echo(f"subject:\t{s['uri']}\t{s['sha256']}")
    for r in record["reviews"]:
        pinned = "current" if r["pinned_to_current"] else "stale (the item changed since)"
        typer.echo(f"review:\t{r['seq']}\t{r['decision']} by {r['reviewer']} on {r['created_at'][:10]}, {pinned}: "
                   f"{' '.join(r['rationale'].split())}")
    if not record["reviews"]:
        typer.echo(f"review:\tnone (`bitcase review add {record['id']} ...` records one)")
    typer.echo("details:")
    typer.echo(json.dumps(record["details"], indent=2, sort_keys=True, ensure_ascii=False))


def register(app: typer.Typer) -> None:
    """Add the `evidence` group to the main app."""
    app.add_typer(evidence_app, name="evidence")
