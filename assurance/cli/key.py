"""`bitcase key`: signing keys and the public keys this user trusts (a keyring of plain files)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from assurance.cli._case_options import emit_json
from assurance.cli._common import JsonOption, err_console
from assurance.cli.db import store_errors

key_app = typer.Typer(name="key", no_args_is_help=True,
                      help="Signing keys (ed25519) and trusted public keys; keyring: $BITCASE_KEYS or "
                           "~/.config/bitcase/keys, trusted keys: $BITCASE_TRUSTED_KEYS or its trusted_keys file.")


@key_app.command("generate")
def generate(
    name: Annotated[str, typer.Option("--name", metavar="NAME", help='The identity the key signs as, e.g. "Ada <ada@example.org>".',
                                      show_default=False)],
    trust: Annotated[bool, typer.Option("--trust", help="Also trust the new key (for a single-user setup).")] = False,
    json_out: JsonOption = False,
) -> None:
    """Create a signing key in the keyring and print its key id.

    The private key file is created with mode 0600 and never printed; hand the .pub file to
    whoever should trust your signatures (`bitcase key trust FILE.pub`).
    """
    from evidence_db.keyring import keyring_from_env

    ring = keyring_from_env()
    with store_errors():
        stored = ring.generate(name)
        trusted = ring.trust(stored.public) if trust else False
    pub = stored.path.with_suffix(".pub")
    err_console.print(f"created signing key {stored.public.key_id} ({escape(stored.public.name)}); public key: "
                      f"{escape(str(pub))}" + ("; trusted" if trusted else ""), highlight=False, soft_wrap=True)
    if json_out:
        emit_json({"key_id": stored.public.key_id, "name": stored.public.name, "public_key_file": str(pub),
                   "trusted": trusted})
    else:
        typer.echo(stored.public.key_id)


@key_app.command("list")
def list_(json_out: JsonOption = False) -> None:
    """List the keyring's signing keys and the trusted keys (key id, name, where)."""
    from evidence_db.keyring import keyring_from_env

    ring = keyring_from_env()
    with store_errors():
        signing = ring.signing_keys()
        trusted = ring.trusted()
    rows = sorted({k.public.key_id for k in signing} | set(trusted.keys))
    own = {k.public.key_id: k for k in signing}
    records = [{"key_id": key_id,
                "name": own[key_id].public.name if key_id in own else trusted.keys[key_id].name,
                "trusted_as": trusted.name_of(key_id), "can_sign": key_id in own,
                "private_key_file": str(own[key_id].path) if key_id in own else None} for key_id in rows]
    if json_out:
        emit_json({"keyring": str(ring.directory), "trusted_keys": str(ring.trusted_path), "keys": records})
        return
    err_console.print(f"keyring {escape(str(ring.directory))}; trusted keys {escape(str(ring.trusted_path))}",
                      highlight=False, soft_wrap=True)
    if not records:
        err_console.print("no keys: create one with `bitcase key generate --name NAME`")
    for rec in records:
        role = ("signing, trusted" if rec["can_sign"] and rec["trusted_as"] is not None else
                "signing" if rec["can_sign"] else "trusted")
        typer.echo(f"{rec['key_id']}\t{role}\t{rec['trusted_as'] if rec['trusted_as'] is not None else rec['name']}")


@key_app.command("trust")
def trust(
    key: Annotated[str, typer.Argument(metavar="KEY", help="A public key file (ssh-ed25519 AAAA… NAME), or the id of a keyring key.",
                                       show_default=False)],
    name: Annotated[str | None, typer.Option("--name", metavar="NAME", help="The identity you vouch for (default: the key's name).")]
    = None,
) -> None:
    """Trust a public key: bundles, reviews and checkpoints it signs then count as signed by NAME.

    Whoever can write the trusted-keys file decides whose signatures count: keep it where only
    the auditor can write (it is never in the evidence store).
    """
    from evidence_db.errors import KeyringError
    from evidence_db.keyring import check_key_name, keyring_from_env
    from evidence_db.keys import KeyFormatError, PublicKey, parse_public_line

    ring = keyring_from_env()
    with store_errors():
        path = Path(key).expanduser()
        if path.is_file():
            try:
                public = parse_public_line(path.read_text(encoding="utf-8"))
            except (KeyFormatError, OSError, UnicodeDecodeError) as exc:
                raise KeyringError(f"{path}: not an ed25519 public key ({exc})",
                                   hint="pass the .pub file `bitcase key generate` or `ssh-keygen -t ed25519` wrote")
        else:
            matches = [k.public for k in ring.signing_keys() if k.public.key_id == key]
            if not matches:
                raise KeyringError(f"{key!r} is neither a public key file nor a key id in {ring.directory}",
                                   hint="pass the signer's .pub file")
            public = matches[0]
        public = PublicKey(public.raw, check_key_name(name if name is not None else public.name))
        added = ring.trust(public)
    err_console.print(f"{'trusted' if added else 'already trusted'}: {public.key_id} as "
                      f"{escape(ring.trusted().name_of(public.key_id) or '')} (in {escape(str(ring.trusted_path))})",
                      highlight=False, soft_wrap=True)
    typer.echo(public.key_id)


def register(app: typer.Typer) -> None:
    """Add the `key` group to the main app."""
    app.add_typer(key_app, name="key")
