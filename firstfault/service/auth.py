"""Who may call the service, and how often.

Tokens: ``firstfault serve token add USER`` makes a random 256-bit token, prints it once and stores
only its SHA-256. A salted slow hash (scrypt) protects guessable passwords; a token drawn from
``secrets`` cannot be guessed, so one SHA-256 is enough and keeps each request's check to a
lookup. A stolen database gives no usable token.

Rate limits: a token bucket per user, in the server's memory (a restart refills the buckets; one
server per data folder, so one set of buckets). ``rate`` tokens a second, up to ``burst`` at once;
a request past it is answered 429 with ``Retry-After``.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from dataclasses import dataclass, field

from firstfault.service.queue import JobStore

TOKEN_PREFIX = "ff_"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


def new_token(store: JobStore, user: str) -> str:
    """A fresh token for ``user``; only its hash is kept, so this is the one time it is seen."""
    if not user or len(user) > 64 or not all(c.isalnum() or c in "._-@" for c in user):
        raise ValueError(f"{user[:80]!r}: a user name is 1-64 letters, digits or . _ - @")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    store.add_token(user, digest(token))
    return token


def user_of(store: JobStore, header: str | None) -> str | None:
    """The user an ``Authorization: Bearer <token>`` header belongs to, or None."""
    if not header or not header.startswith("Bearer "):
        return None
    token = header[len("Bearer ") :].strip()
    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    return store.user_for(digest(token))


@dataclass
class RateLimiter:
    """Token buckets per user; ``rate <= 0`` turns limiting off (a benchmark, a trusted network)."""

    rate: float
    burst: float
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def allow(self, user: str) -> float:
        """0 if the request may go, else the seconds to wait before the next one will."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        with self._lock:
            level, then = self._buckets.get(user, (self.burst, now))
            level = min(self.burst, level + (now - then) * self.rate)
            if level >= 1:
                self._buckets[user] = (level - 1, now)
                return 0.0
            self._buckets[user] = (level, now)
            return (1 - level) / self.rate
