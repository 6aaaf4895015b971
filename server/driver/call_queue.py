"""Calls from other threads (the metrics scrape, tests, the command line): each hops onto the event
loop and is answered on a concurrent future. A call waits here until the loop gets to it, and is
not run when its deadline passed meanwhile, or refused when the server shuts down first.

Owns the waiting calls. Must not touch the engine: the driver runs each call (`run_all` with its
read and write) on the loop.
"""
from __future__ import annotations

import collections
import time
from concurrent.futures import Future
from typing import Any, Callable

from .errors import DeadlineExceeded, ShuttingDown

__all__ = ["CallQueue"]


class CallQueue:
    def __init__(self, admit: Callable[[], None], post: Callable[[], bool]):
        """`admit()` raises when a call is refused (load, shutting down); `post()` has the loop run
        the waiting calls soon (False when the loop is gone)."""
        self.admit, self.post = admit, post
        self._waiting: collections.deque = collections.deque()  # (is_command, work, Future, deadline)

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, is_command: bool, work, timeout_s: float | None) -> Future:
        """Queue a call (any thread): a read (fn) or a write (a command); its future."""
        fut: Future = Future()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            self.admit()
        except Exception as e:  # noqa: BLE001 - the caller gets it
            fut.set_exception(e)
            return fut
        self._waiting.append((is_command, work, fut, deadline))
        if not self.post():
            self._waiting.clear()
            fut.set_exception(ShuttingDown("the server is shutting down"))
        return fut

    def run_all(self, read: Callable[[Callable[[], Any]], Any], write: Callable[..., Any],
                after_read: Callable[[], None]) -> None:
        """Run the waiting calls (loop thread): `read(fn)` answers with its result, `write(cmd, fut)`
        answers once durable; `after_read()` after each read (a closure may have given the
        scheduler work)."""
        while self._waiting:
            is_command, work, fut, deadline = self._waiting.popleft()
            if not fut.set_running_or_notify_cancel():
                continue
            if deadline is not None and time.monotonic() > deadline:
                fut.set_exception(DeadlineExceeded("the deadline passed before the request ran: nothing was done"))
                continue
            try:
                if is_command:
                    write(work, fut)
                else:
                    fut.set_result(read(work))
                    after_read()
            except BaseException as e:  # noqa: BLE001 - the caller gets it
                fut.set_exception(e)

    def refuse(self, error: Exception) -> None:
        """Answer every waiting call with `error`."""
        while self._waiting:
            _, _, fut, _ = self._waiting.popleft()
            if fut.set_running_or_notify_cancel():
                fut.set_exception(error)
