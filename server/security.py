"""Authentication and authorization: bearer tokens mapped to principals, per-stream permissions.

The tokens file (JSON, `serve --tokens FILE`) holds token hashes, never tokens:

    {"tokens": {"<sha256 hex of the token>": "alice", ...},
     "grants": {"alice": {"packets*": ["read", "write"]},
                "ops":   {"*": ["admin"]}}}

Actions: `read` (queries, subscriptions, describe, stats, history), `write` (append, slide, staged
batches) and `admin` (create and drop streams, unregister anyone's periodic query; implies read
and write). Stream patterns are shell wildcards. The file is re-read when it changes (checked at
most once a second), so tokens can be added and revoked without a restart.
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import threading
import time


ACTIONS = ("read", "write", "admin")
ANONYMOUS = ""  # no --tokens: every caller may do everything


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class AccessPolicy:
    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()
        self._mtime: int | None = None
        self._checked = 0.0
        self.tokens: dict[str, str] = {}
        self.grants: dict[str, list[tuple[str, frozenset]]] = {}
        self._load()

    def _load(self) -> None:
        try:
            mtime = os.stat(self.path).st_mtime_ns
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
            tokens = {str(h).lower(): str(p) for h, p in data.get("tokens", {}).items()}
            grants = {}
            for principal, streams in data.get("grants", {}).items():
                rules = []
                for pattern, actions in streams.items():
                    bad = [a for a in actions if a not in ACTIONS]
                    if bad:
                        raise ValueError(f"unknown action {bad[0]!r} for {principal!r} (actions: {', '.join(ACTIONS)})")
                    rules.append((pattern, frozenset(actions)))
                grants[principal] = rules
        except (OSError, ValueError, AttributeError) as e:
            if self._mtime is None:
                raise ValueError(f"tokens file {self.path}: {e}") from None
            return  # a broken edit: keep the last good policy
        self.tokens, self.grants, self._mtime = tokens, grants, mtime

    def _maybe_reload(self) -> None:
        now = time.monotonic()
        if now - self._checked < 1.0:
            return
        with self._lock:
            self._checked = now
            try:
                if os.stat(self.path).st_mtime_ns != self._mtime:
                    self._load()
            except OSError:
                pass

    def principal(self, metadata) -> str | None:
        """The caller's principal from its `authorization: Bearer <token>` metadata, or None."""
        self._maybe_reload()
        for key, value in metadata or ():
            if key == "authorization" and isinstance(value, str) and value.lower().startswith("bearer "):
                return self.tokens.get(token_hash(value[7:].strip()))
        return None

    def allowed(self, principal: str, action: str, stream: str) -> bool:
        for pattern, actions in self.grants.get(principal, ()):
            if fnmatch.fnmatchcase(stream, pattern) and (action in actions or "admin" in actions):
                return True
        return False


def is_loopback(host: str) -> bool:
    return host in ("localhost", "::1", "[::1]") or host.startswith("127.")
