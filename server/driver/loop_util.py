"""Moving work onto the event loop from any thread, and answering futures from it. Stateless: the
loop is the caller's."""
from __future__ import annotations

import asyncio


def post(loop: asyncio.AbstractEventLoop, fn, *args) -> bool:
    """Run fn on the loop (from any thread); False when the loop is gone."""
    try:
        loop.call_soon_threadsafe(fn, *args)
        return True
    except RuntimeError:  # the loop is closed: the server is gone
        return False


def on_loop_thread(loop: asyncio.AbstractEventLoop | None) -> bool:
    """Whether the caller runs on `loop`'s thread."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def settle(fut, result=None, error: BaseException | None = None) -> None:
    """Answer an asyncio or a concurrent future, unless its caller has gone (cancelled)."""
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)
