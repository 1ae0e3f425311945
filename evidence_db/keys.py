"""ed25519 keys in OpenSSH formats, identified by their SHA-256 fingerprint.

A public key is written as one OpenSSH line (``ssh-ed25519 AAAA… NAME``); its key id is
``SHA256:<base64>`` of the key blob, the fingerprint ``ssh-keygen -l`` prints, so anyone can
check an id with standard tools, and an existing ``ssh-keygen -t ed25519`` key works as is.
A private key is an unencrypted OpenSSH private key file, readable by its owner only.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

__all__ = ["PublicKey", "SigningKey", "KeyFormatError", "parse_public_line", "load_private_key", "generate_key",
           "fingerprint"]

ED25519 = "ssh-ed25519"


class KeyFormatError(ValueError):
    """Text that is not an ed25519 key in the expected format."""


def fingerprint(blob: bytes) -> str:
    """The key id of an OpenSSH public key blob: ``SHA256:`` and unpadded base64, as ssh-keygen prints."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii").rstrip("=")


@dataclass(frozen=True, slots=True)
class PublicKey:
    """An ed25519 public key, its key id and the identity (name) that goes with it."""

    raw: Ed25519PublicKey
    name: str = ""

    @property
    def openssh(self) -> str:
        """``ssh-ed25519 AAAA…`` (no name): the stored and compared form of the key."""
        return self.raw.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()

    @property
    def key_id(self) -> str:
        return fingerprint(base64.b64decode(self.openssh.split()[1]))

    def line(self) -> str:
        """The key as one public-key file line, with its name."""
        return f"{self.openssh} {self.name}".rstrip()


@dataclass(frozen=True, slots=True)
class SigningKey:
    """An ed25519 private key with its public half; never printed or logged."""

    private: Ed25519PrivateKey
    name: str = ""

    @property
    def public(self) -> PublicKey:
        return PublicKey(self.private.public_key(), self.name)

    @property
    def key_id(self) -> str:
        return self.public.key_id

    def sign(self, message: bytes) -> bytes:
        """The ed25519 signature of ``message``."""
        return self.private.sign(message)

    def private_openssh(self) -> bytes:
        """The private key as an unencrypted OpenSSH private key file."""
        return self.private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                          serialization.NoEncryption())

    def __repr__(self) -> str:  # keep the key material out of tracebacks and logs
        return f"SigningKey({self.key_id}, name={self.name!r})"


def parse_public_line(text: str) -> PublicKey:
    """A public key from ``ssh-ed25519 AAAA… [NAME]`` (the name may contain spaces)."""
    parts = text.strip().split(maxsplit=2)
    if len(parts) < 2 or parts[0] != ED25519:
        raise KeyFormatError("expected an OpenSSH ed25519 public key line: ssh-ed25519 AAAA… NAME")
    try:
        base64.b64decode(parts[1], validate=True)
        raw = serialization.load_ssh_public_key(f"{parts[0]} {parts[1]}".encode("ascii"))
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise KeyFormatError("the key data of the ssh-ed25519 line does not decode") from None
    if not isinstance(raw, Ed25519PublicKey):
        raise KeyFormatError("not an ed25519 key")
    return PublicKey(raw, parts[2].strip() if len(parts) > 2 else "")


def load_private_key(data: bytes, *, name: str = "") -> SigningKey:
    """A signing key from an OpenSSH (or PKCS#8 PEM) private key file's bytes, unencrypted."""
    try:
        if b"OPENSSH PRIVATE KEY" in data:
            raw = serialization.load_ssh_private_key(data, password=None)
        else:
            raw = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise KeyFormatError("the private key is passphrase-protected; bitcase reads unencrypted keys "
                             "(kept with file mode 0600)") from None
    except (ValueError, binascii.Error):
        raise KeyFormatError("not an OpenSSH or PEM private key") from None
    if not isinstance(raw, Ed25519PrivateKey):
        raise KeyFormatError("not an ed25519 private key")
    return SigningKey(raw, name)


def generate_key(name: str) -> SigningKey:
    """A new random ed25519 signing key for the identity ``name``."""
    return SigningKey(Ed25519PrivateKey.generate(), name)
