"""The keyring: this user's signing keys and the public keys they trust, as plain files.

* Keyring directory: ``$BITCASE_KEYS``, else ``$XDG_CONFIG_HOME/bitcase/keys``, else
  ``~/.config/bitcase/keys`` (mode 0700). Each signing key is ``<id>.key`` (OpenSSH private
  key, mode 0600) beside ``<id>.pub`` (one OpenSSH public-key line ending in the key's name).
* Trusted keys: ``$BITCASE_TRUSTED_KEYS``, else ``trusted_keys`` in the keyring directory;
  one OpenSSH public-key line per trusted key, the name being the identity vouched for.

Trust lives outside the evidence store on purpose: whoever can write the store must not be
able to make their own key trusted (docs/threat-model.md).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from evidence_db.atomic import atomic_file
from evidence_db.errors import KeyringError
from evidence_db.keys import KeyFormatError, PublicKey, SigningKey, generate_key, load_private_key, parse_public_line

__all__ = ["Keyring", "TrustedKeys", "StoredKey", "keyring_from_env", "check_key_name"]

MAX_NAME = 200


def check_key_name(name: str) -> str:
    """``name`` stripped, if it can name a key (one line of text, 1 to 200 characters)."""
    name = name.strip()
    if not name or len(name) > MAX_NAME or any(ord(ch) < 32 for ch in name):
        raise KeyringError(f"key name {name!r} must be one line of 1 to {MAX_NAME} characters",
                           hint='e.g. --name "Ada Lovelace <ada@example.org>"')
    return name


@dataclass(frozen=True, slots=True)
class StoredKey:
    """A signing key held in the keyring (its public half and where the private half is)."""

    public: PublicKey
    path: Path


@dataclass(frozen=True, slots=True)
class TrustedKeys:
    """The trusted public keys, by key id."""

    keys: Mapping[str, PublicKey]
    path: Path | None = None

    def get(self, key_id: str) -> PublicKey | None:
        """The trusted key with this id, or None."""
        return self.keys.get(key_id)

    def name_of(self, key_id: str) -> str | None:
        """The identity the key is trusted as, or None when the key is not trusted."""
        key = self.keys.get(key_id)
        return None if key is None else key.name


def keyring_from_env(environ: Mapping[str, str] | None = None) -> Keyring:
    """The keyring named by ``$BITCASE_KEYS``/``$BITCASE_TRUSTED_KEYS`` or the defaults."""
    env = os.environ if environ is None else environ
    if env.get("BITCASE_KEYS"):
        directory = Path(env["BITCASE_KEYS"]).expanduser()
    else:
        config = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else Path.home() / ".config"
        directory = config / "bitcase" / "keys"
    trusted = Path(env["BITCASE_TRUSTED_KEYS"]).expanduser() if env.get("BITCASE_TRUSTED_KEYS") else None
    return Keyring(directory, trusted or directory / "trusted_keys")


def _file_stem(key_id: str) -> str:
    """A key id as a file name (base64's ``/`` and ``+`` cannot appear in one)."""
    return key_id.removeprefix("SHA256:").replace("/", "_").replace("+", "-")


@dataclass(frozen=True, slots=True)
class Keyring:
    """A keyring directory and its trusted-keys file."""

    directory: Path
    trusted_path: Path

    def generate(self, name: str) -> StoredKey:
        """Create a new signing key named ``name``; its private file is created 0600, never overwritten."""
        key = generate_key(check_key_name(name))
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        stem = self.directory / _file_stem(key.key_id)
        private = stem.with_suffix(".key")
        try:
            fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            raise KeyringError(f"cannot create {private}: {exc.strerror}") from None
        with os.fdopen(fd, "wb") as f:
            f.write(key.private_openssh())
        _write_atomic(stem.with_suffix(".pub"), key.public.line() + "\n", mode=0o644)
        return StoredKey(key.public, private)

    def signing_keys(self) -> list[StoredKey]:
        """The keyring's signing keys, by key id."""
        if not self.directory.is_dir():
            return []
        found = []
        for pub in sorted(self.directory.glob("*.pub")):
            if pub.with_suffix(".key").is_file():
                found.append(StoredKey(_read_public_file(pub), pub.with_suffix(".key")))
        return sorted(found, key=lambda k: k.public.key_id)

    def signing_key(self, spec: str) -> SigningKey:
        """The signing key ``spec`` names: a private key file, a key id (or a unique prefix), or a key name."""
        path = Path(spec).expanduser()
        if path.is_file():
            pub = path.with_name(path.name + ".pub") if path.suffix != ".key" else path.with_suffix(".pub")
            name = _read_public_file(pub).name if pub.is_file() else ""
            return _load_private_file(path, name)
        keys = self.signing_keys()
        matches = [k for k in keys if k.public.key_id == spec] or \
                  [k for k in keys if k.public.key_id.startswith(spec) or k.public.name == spec]
        if len(matches) != 1:
            what = "no" if not matches else f"{len(matches)}"
            raise KeyringError(f"{what} signing key in {self.directory} matches {spec!r}",
                               hint="`bitcase key list` shows the keys; pass a key id, a name, or a private key file")
        return _load_private_file(matches[0].path, matches[0].public.name)

    def trusted(self) -> TrustedKeys:
        """The trusted keys (none when the file does not exist)."""
        if not self.trusted_path.exists():
            return TrustedKeys({}, self.trusted_path)
        keys: dict[str, PublicKey] = {}
        for number, line in enumerate(_read_text(self.trusted_path).splitlines(), start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                key = parse_public_line(line)
            except KeyFormatError as exc:
                raise KeyringError(f"{self.trusted_path}:{number}: {exc}",
                                   hint="each line is `ssh-ed25519 AAAA… NAME`; fix or delete the line") from None
            keys[key.key_id] = key
        return TrustedKeys(keys, self.trusted_path)

    def trust(self, key: PublicKey) -> bool:
        """Record ``key`` (with its name) as trusted; False when it already was (its name is kept)."""
        current = self.trusted()
        if key.key_id in current.keys:
            return False
        lines = [k.line() for k in sorted([*current.keys.values(), key], key=lambda k: k.key_id)]
        self.trusted_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _write_atomic(self.trusted_path, "".join(f"{line}\n" for line in lines), mode=0o644)
        return True


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyringError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None


def _read_public_file(path: Path) -> PublicKey:
    try:
        return parse_public_line(_read_text(path))
    except KeyFormatError as exc:
        raise KeyringError(f"{path}: {exc}", hint="a public key file holds one line `ssh-ed25519 AAAA… NAME`") from None


def _load_private_file(path: Path, name: str) -> SigningKey:
    try:
        mode = path.stat().st_mode
        data = path.read_bytes()
    except OSError as exc:
        raise KeyringError(f"cannot read the private key {path}: {exc.strerror}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise KeyringError(f"the private key {path} is readable by other users (mode {stat.S_IMODE(mode):o})",
                           hint=f"chmod 600 {path}")
    try:
        return load_private_key(data, name=name)
    except KeyFormatError as exc:
        raise KeyringError(f"{path}: {exc}") from None


def _write_atomic(path: Path, text: str, *, mode: int) -> None:
    with atomic_file(path, mode=mode) as f:
        f.write(text)
