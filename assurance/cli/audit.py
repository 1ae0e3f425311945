"""`bitcase audit`: check the evidence store's integrity."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from assurance.cli._aliases import deprecated_alias
from assurance.cli._common import EXIT_FINDINGS, BitcaseError, DbOption, JsonOption, err_console
from assurance.cli._signing import load_signing_key
from assurance.cli.db import store_errors
from evidence_db.views import ChainFault

audit_app = typer.Typer(name="audit", help="Audit the evidence store and the assurance case.", no_args_is_help=True)


@audit_app.command("verify")
def verify(
    db: DbOption = None,
    expect_head: Annotated[Path | None, typer.Option(
        "--expect-head", metavar="FILE", help="A checkpoint from `bitcase audit head`: also fail (exit 1) when the "
                                              "store was truncated or rewritten since, or the checkpoint's signature "
                                              "fails or its key is not trusted.")] = None,
    json_output: JsonOption = False,
) -> None:
    """Recompute the store's hash chain and its signatures; exit 1 naming the first row edited, deleted, reordered or outside it.

    Detects changes made behind bitcase's back (e.g. raw SQL), names every stray row (seq below
    1 or beyond the head, two rows at one position), and signatures that no longer match what
    they sign. A writer who recomputes the whole chain, or removes its newest rows, is detected
    only against a checkpoint kept outside the store (--expect-head).
    """
    from evidence_db.checkpoint import checkpoint_problems, read_checkpoint
    from evidence_db.keyring import keyring_from_env
    from evidence_db.session import open_session, store_label
    from evidence_db.signatures import list_signers
    from evidence_db.verify import verify_chain

    with store_errors():
        checkpoint = read_checkpoint(expect_head) if expect_head is not None else None
        trusted = keyring_from_env().trusted()
        with open_session(db) as session, err_console.status("verifying the hash chain…"):
            report = verify_chain(session=session)
            signers = list_signers(session=session)
            problems = (checkpoint_problems(session=session, checkpoint=checkpoint, trusted=trusted)
                        if checkpoint is not None else [])
    is_intact = report.is_intact and not problems
    signer_records = [{"key_id": s.key_id, "name": s.name, "trusted_as": trusted.name_of(s.key_id),
                       "signatures": s.num_signatures, "items": s.num_items} for s in signers]
    if json_output:
        typer.echo(json.dumps({
            "store": store_label(db), "intact": is_intact, "rows": report.num_rows,
            "head": {"seq": report.head_seq, "digest": report.head_digest},
            "first_bad": None if report.first_bad is None else _fault_json(report.first_bad),
            "faults": [_fault_json(f) for f in report.faults], "signers": signer_records,
            "checkpoint": None if checkpoint is None else {
                "file": str(expect_head), "seq": checkpoint.seq, "chain_digest": checkpoint.chain_digest,
                "time": checkpoint.time, "key_id": checkpoint.signer.key_id, "problems": problems},
        }))
    else:
        if report.is_intact:
            typer.echo(f"hash chain intact: {report.num_rows} rows, head seq {report.head_seq} {report.head_digest}")
        else:
            first = report.first_bad
            typer.echo(f"hash chain BROKEN: first bad row seq {first.seq} ({_label(first)}): {first.reason}")
            for fault in report.faults[1:]:
                typer.echo(f"  also seq {fault.seq} ({_label(fault)}): {fault.reason}")
        for rec in signer_records:
            who = f"trusted as {rec['trusted_as']}" if rec["trusted_as"] is not None else "key NOT trusted"
            typer.echo(f"signed bundles: {rec['signatures']} by {rec['key_id']} ({who}), {rec['items']} items")
        if checkpoint is not None:
            typer.echo(f"checkpoint {expect_head} (seq {checkpoint.seq}, {checkpoint.time}): "
                       + ("the store extends it" if not problems else "FAILED"))
            for problem in problems:
                typer.echo(f"  {problem}")
    if not is_intact:
        raise typer.Exit(EXIT_FINDINGS)


@audit_app.command("head")
def head(
    out: Annotated[Path, typer.Option("--out", metavar="FILE", help="Where to write the signed checkpoint (JSON).",
                                      show_default=False)],
    sign_key: Annotated[str | None, typer.Option(
        "--sign-key", envvar="BITCASE_SIGNING_KEY", metavar="KEY",
        help="The signing key: a key id, a key name or a private key file.")] = None,
    key: Annotated[str | None, deprecated_alias("--key", "--sign-key", metavar="KEY")] = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Write a signed checkpoint of the chain head (store id, seq, chain digest, time) after verifying the chain.

    Keep the file outside the store (another machine, a ticket, a commit): `bitcase audit verify
    --expect-head FILE` then detects truncation and wholesale rewrites since. Exit 1, writing
    nothing, when the chain does not verify.
    """
    from evidence_db.checkpoint import make_checkpoint, write_checkpoint
    from evidence_db.session import open_session
    from evidence_db.verify import verify_chain

    with store_errors():
        key = key if key is not None else sign_key  # the old spelling, given explicitly, beats $BITCASE_SIGNING_KEY
        if not key:
            raise BitcaseError("a checkpoint must be signed: no --sign-key given and $BITCASE_SIGNING_KEY is unset",
                               hint="create a key with `bitcase key generate --name NAME`")
        signer = load_signing_key(key)
        with open_session(db) as session, err_console.status("verifying the hash chain…"):
            report = verify_chain(session=session)
            envelope = make_checkpoint(session=session, key=signer) if report.is_intact else None
        if envelope is None:
            fault = report.first_bad
            typer.echo(f"hash chain BROKEN: first bad row seq {fault.seq} ({_label(fault)}): {fault.reason}")
            err_console.print("no checkpoint written: it would vouch for a damaged chain", highlight=False)
            raise typer.Exit(EXIT_FINDINGS)
        try:
            write_checkpoint(out, envelope)
        except OSError as exc:
            raise BitcaseError(f"cannot write the checkpoint {out}: {exc.strerror}") from None
    body = json.loads(envelope.payload)
    err_console.print(f"wrote checkpoint of seq {body['seq']} signed by {signer.key_id} to {out}",
                      highlight=False, soft_wrap=True, markup=False)
    if json_output:
        typer.echo(json.dumps({"file": str(out), "key_id": signer.key_id, **{k: body[k] for k in (
            "store_id", "seq", "chain_digest", "time")}}, sort_keys=True))
    else:
        typer.echo(f"{body['seq']}\t{body['chain_digest']}")


def _label(fault: ChainFault) -> str:
    return f"{fault.kind} {fault.key!r}" if fault.key else fault.kind


def _fault_json(fault: ChainFault) -> dict[str, object]:
    return {"seq": fault.seq, "kind": fault.kind, "key": fault.key, "reason": fault.reason}


def register(app: typer.Typer) -> None:
    """Add the `audit` group (with `verify` and `head`) to the main app."""
    app.add_typer(audit_app, name="audit")
