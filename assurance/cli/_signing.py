"""The ``--sign-key`` option of the commands that write evidence bundles."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from evidence_db.keys import SigningKey

__all__ = ["SignKeyOption", "load_signing_key"]

SignKeyOption = Annotated[str | None, typer.Option(
    "--sign-key", envvar="BITCASE_SIGNING_KEY", metavar="KEY",
    help="Sign the bundles written (a detached <bundle>.sig) with this key: a key id, a key name or a private key "
         "file. Unset: unsigned.")]


def load_signing_key(spec: str | None) -> SigningKey | None:
    """The signing key ``spec`` names in the keyring (None: sign nothing); raises ``KeyringError``."""
    if not spec:
        return None
    from evidence_db.keyring import keyring_from_env

    return keyring_from_env().signing_key(spec)
