"""ServerProcess, the real server every integration test, benchmark and the demo start: its output
pipes are read while it runs, so a server that logs a lot keeps serving (a pipe nobody reads fills
and blocks the server's next log line, and with it its event loop)."""
from __future__ import annotations

import os
import threading

import pyarrow as pa
import pytest

from windowstore.clients import Client, NotFound
from windowstore.server.process import PipeTail, ServerProcess

# refused calls, each logged as one client_error line of ~250 bytes: several times the 64 KiB a
# Linux pipe holds
REFUSALS = 1500


def test_a_server_logging_more_than_a_pipe_holds_keeps_answering():
    table = pa.table({"ts": pa.array([1], pa.int64()), "v": pa.array([1.0])})
    # every refusal logged (the default logs 10 per method and code in 10 s: too few to fill a pipe)
    with ServerProcess("--client-error-log-limit", "0") as srv, Client(srv.target, timeout=30.0, retries=0) as c:
        for _ in range(REFUSALS):
            with pytest.raises(NotFound):
                c.append("no_such_stream", table)  # each one logged by the server (client_error)
        assert c.list_streams() == []
        code, _, err = srv.stop()
    assert code == 0
    lines = [line for line in err.splitlines() if "client_error" in line and "no_such_stream" in line]
    assert len(lines) == REFUSALS, f"{len(lines)} client_error lines of {REFUSALS} refusals"
    assert srv.stderr.lines >= REFUSALS


def test_a_pipe_tail_keeps_the_last_bytes_and_counts_every_line():
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "r") as pipe:
        tail = PipeTail(pipe, "test-tail", keep_bytes=1000)
        lines = [f"line {i:05d}\n" for i in range(2000)]  # 11 bytes each: 22,000 in all
        writer = threading.Thread(target=lambda: _write_all(write_end, lines))
        writer.start()
        writer.join()
        assert tail.join(30.0)
        tail._check()
    assert tail.lines == 2000
    kept = tail.text()
    assert len(kept) <= 1000 and "".join(lines).endswith(kept)
    assert len(kept) > 1000 - 11  # whole lines, as many as fit
    assert tail.tail(2) == ["line 01998", "line 01999"]
    assert tail.tail(0) == []


def _write_all(fd: int, lines: list[str]) -> None:
    with os.fdopen(fd, "w") as f:
        for line in lines:
            f.write(line)
