"""Secret values of connector configs sealed before they are stored: in the distributed config
topic, and in standalone mode's ``connectors.json`` when a key is set.

Every worker of a group reads the config topic, and so does anything else with read access to
it: a mirror, a backup, a consumer someone starts to debug. Kafka Connect writes the values as
sent, so a literal password sent over REST lands there in clear. Here a secret value (a
password-type key, or a value holding ``scheme://user:password@``) that is not only
placeholders is sealed with ``config.storage.encryption.key``, a key every worker of the group
shares and Kafka never sees. A distributed worker without a key refuses such values instead of
storing them in clear (a standalone one keeps them in its 0600 file, as before).

The seal is AES-256-GCM, its key derived from the configured text with HKDF-SHA256. The
connector's name and the config key are the associated data, so a sealed value copied into
another connector, or under another key of the same one, does not open: whoever may write the
topic still cannot make one connector's password follow another connector's host. A token
names the key it was sealed with (a short id, not the key), so a worker holding another key
says so instead of reporting a corrupt value; ``config.storage.encryption.previous.keys`` opens
values sealed before a key change (writes always use the current key).
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

#: the shortest key text accepted: `secrets.token_urlsafe(32)` gives 43 characters
MIN_KEY_LENGTH = 32
_VERSION = "v1"
_NONCE = 12


class SealError(Exception):
    """A sealed value this worker cannot open; the message says why, never the value."""


@dataclass(frozen=True)
class _Key:
    id: str
    aead: AESGCM


def _derive(text: str) -> _Key:
    raw = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=None, info=b"tidemark config topic v1"
    ).derive(text.encode())
    return _Key(hashlib.sha256(b"tidemark key id\0" + raw).hexdigest()[:12], AESGCM(raw))


def key_problem(text: str) -> str | None:
    """Why ``text`` cannot be a sealing key, or None."""
    if len(text) < MIN_KEY_LENGTH:
        return (
            f"must be at least {MIN_KEY_LENGTH} characters (e.g. the output of "
            "`tidemark config-key`)"
        )
    return None


def _aad(connector: str, key: str) -> bytes:
    return f"{connector}\0{key}".encode()


class Sealer:
    def __init__(self, current: str | None, previous: Sequence[str] = ()) -> None:
        self._current = _derive(current) if current else None
        self._keys = {k.id: k for k in (_derive(t) for t in previous)}
        if self._current is not None:
            self._keys[self._current.id] = self._current

    @property
    def enabled(self) -> bool:
        return self._current is not None

    def is_current(self, token: str) -> bool:
        """Whether ``token`` was sealed with this worker's current key (else a worker that
        has one seals it again, so a retired key can be dropped)."""
        return self._current is not None and token.split(":", 2)[1:2] == [self._current.id]

    def seal(self, connector: str, key: str, value: str) -> str:
        if self._current is None:
            raise SealError("config.storage.encryption.key is not set on this worker")
        nonce = os.urandom(_NONCE)
        box = self._current.aead.encrypt(nonce, value.encode(), _aad(connector, key))
        body = base64.urlsafe_b64encode(nonce + box).decode().rstrip("=")
        return f"{_VERSION}:{self._current.id}:{body}"

    def split(
        self,
        connector: str,
        config: Mapping[str, str],
        is_secret: Callable[[Mapping[str, str], str, str], bool],
    ) -> tuple[dict[str, str], dict[str, str]]:
        """``config`` as (the values kept as they are, the secret ones sealed)."""
        plain: dict[str, str] = {}
        sealed: dict[str, str] = {}
        for k, v in config.items():
            if is_secret(config, k, v):
                sealed[k] = self.seal(connector, k, v)
            else:
                plain[k] = v
        return plain, sealed

    def unseal(self, connector: str, key: str, token: str) -> str:
        version, _, rest = token.partition(":")
        key_id, _, body = rest.partition(":")
        if version != _VERSION or not body:
            raise SealError(f"not a sealed value this version can read ({version or 'empty'})")
        k = self._keys.get(key_id)
        if k is None:
            held = ", ".join(sorted(self._keys)) or "none"
            raise SealError(
                f"sealed with key {key_id}, which this worker does not hold (its keys: {held}); "
                "set config.storage.encryption.key (or .previous.keys) to the group's key"
            )
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            return k.aead.decrypt(raw[:_NONCE], raw[_NONCE:], _aad(connector, key)).decode()
        except (InvalidTag, ValueError) as exc:
            raise SealError(
                f"the sealed value does not open with key {key_id} for this connector and key "
                "(altered, or copied from another connector or key)"
            ) from exc
