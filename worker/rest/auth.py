"""Who may call the REST API: HTTP basic auth against a credentials file, with two roles.

The file is what Kafka Connect's basic-auth extension reads through its
``PropertyFileLoginModule``: Java properties, one ``user=password`` (or ``user: password``) a
line. Kafka Connect has no roles; tidemark has two: ``admin`` (every request) and ``read-only``
(``GET`` only, for monitoring and ``tidemark status``), the users listed in
``rest.basic.auth.readonly.users``. The file is read at start; changing it needs a restart.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Iterable
from pathlib import Path

from cdc.java_properties import parse_properties

READ_METHODS = frozenset({"GET", "HEAD"})


class AuthError(ValueError):
    """The credentials file cannot be used; the message names it."""


class BasicAuth:
    def __init__(self, users: dict[str, str], readonly: Iterable[str] = ()) -> None:
        self.users = users
        self.readonly = frozenset(readonly)
        unknown = self.readonly - set(users)
        if unknown:
            raise AuthError(
                f"rest.basic.auth.readonly.users names users not in the credentials file: "
                f"{', '.join(sorted(unknown))}"
            )

    @classmethod
    def from_file(cls, path: Path, readonly: Iterable[str] = ()) -> BasicAuth:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise AuthError(
                f"rest.basic.auth.credentials.file {path}: cannot read it: {exc.strerror}"
            ) from exc
        users = {u: p for u, p in parse_properties(text).items() if u}
        if not users:
            raise AuthError(f"rest.basic.auth.credentials.file {path} holds no user=password line")
        return cls(users, readonly)

    def check(self, header: str | None, method: str) -> tuple[int, str] | None:
        """None when allowed; else ``(401 or 403, message)``."""
        user = self._user(header)
        if user is None:
            return 401, "Authentication required: HTTP basic auth with a user of the worker"
        if user in self.readonly and method not in READ_METHODS:
            return 403, f"User {user} is read-only: only GET requests are allowed"
        return None

    def _user(self, header: str | None) -> str | None:
        if not header or not header.lower().startswith("basic "):
            return None
        try:
            decoded = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        user, sep, password = decoded.partition(":")
        expected = self.users.get(user)
        # compare even for an unknown user, so timing does not tell which users exist
        ok = hmac.compare_digest(password.encode(), (expected or "\0").encode())
        return user if sep and expected is not None and ok else None
