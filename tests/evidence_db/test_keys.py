"""Keys, key ids and DSSE envelopes, checked against the DSSE spec and OpenSSH's own tools."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from evidence_db.dsse import envelope_from_json, pae, sign_payload
from evidence_db.errors import KeyringError
from evidence_db.keyring import Keyring
from evidence_db.keys import KeyFormatError, generate_key, parse_public_line


def test_pae_matches_the_dsse_spec_example() -> None:
    assert pae("http://example.com/HelloWorld", b"hello world") == \
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"


def test_envelope_round_trip_and_tampering() -> None:
    key, other = generate_key("a"), generate_key("b")
    envelope = envelope_from_json(sign_payload(key, "application/x-test", {"n": 1}).to_json())
    assert envelope.verify(key.public) and not envelope.verify(other.public)
    edited = envelope.to_json() | {"payloadType": "application/x-other"}
    assert not envelope_from_json(edited).verify(key.public)  # the type is signed too (PAE)


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH's ssh-keygen")
def test_key_ids_are_what_ssh_keygen_prints(tmp_path: Path) -> None:
    ring = Keyring(tmp_path / "keys", tmp_path / "keys" / "trusted_keys")
    stored = ring.generate("Ada <ada@example.org>")
    listed = subprocess.run(["ssh-keygen", "-lf", str(stored.path.with_suffix(".pub"))], capture_output=True,
                            text=True, check=True).stdout.split()
    assert listed[1] == stored.public.key_id
    derived = subprocess.run(["ssh-keygen", "-y", "-f", str(stored.path)], capture_output=True, text=True,
                             check=True).stdout  # OpenSSH reads the private key file
    assert parse_public_line(derived).key_id == stored.public.key_id


def test_private_keys_are_0600_and_refused_when_readable_by_others(tmp_path: Path) -> None:
    ring = Keyring(tmp_path / "keys", tmp_path / "trusted_keys")
    stored = ring.generate("ci")
    assert stored.path.stat().st_mode & 0o777 == 0o600
    assert ring.signing_key("ci").key_id == stored.public.key_id
    assert repr(ring.signing_key(stored.public.key_id)).startswith("SigningKey(SHA256:")  # no key material
    stored.path.chmod(0o644)
    with pytest.raises(KeyringError, match="readable by other users"):
        ring.signing_key("ci")


def test_trusted_keys_file_errors_name_the_line(tmp_path: Path) -> None:
    ring = Keyring(tmp_path / "keys", tmp_path / "trusted_keys")
    assert ring.trust(generate_key("a").public) and ring.trusted_path.read_text().count("\n") == 1
    with open(ring.trusted_path, "a") as f:
        f.write("ssh-rsa AAAA bob\n")
    with pytest.raises(KeyringError, match=r"trusted_keys:2: "):
        ring.trusted()


def test_unknown_key_spec_and_bad_public_line(tmp_path: Path) -> None:
    ring = Keyring(tmp_path / "keys", tmp_path / "trusted_keys")
    with pytest.raises(KeyringError, match="no signing key"):
        ring.signing_key("SHA256:nope")
    with pytest.raises(KeyFormatError):
        parse_public_line("ssh-ed25519 not-base64!")
