#!/usr/bin/env python
"""Crash-test harness: kill -9 a real `windowstore serve` at random moments, restart it on the same
data directory, and check that nothing acknowledged was lost or duplicated.

    python tests/crash.py --kills 100 --seed 1 [--fsync always|interval|off|mixed] [--data-dir DIR]
                          [--modes random,snapshot,...] [--no-clean-restart] [--work-around-empty-segment]

One cycle = start the server (random snapshot settings, so snapshots happen all the time), verify
what the previous kill left, run a bounded concurrent workload, and SIGKILL the server. The kill
timing ("mode", drawn per cycle from --modes) is one of:
  startup    while the server is still starting (recovering): no workload, verified at the next start
  immediate  right after the verification, before or as the first requests go out
  random     at a uniformly random moment of the workload
  mid-batch  while a big (800-2000 row) batch is in flight
  snapshot   the moment a snapshot is seen being written (snapshots/<lsn>.tmp exists)
  segment    the moment a new log segment is seen before its first record (only the magic)
  idle       after the workload finished (nothing in doubt)
On about a quarter of the cycles (all but startup and immediate ones), while the workload runs, a
second `windowstore serve` is started on the live data directory: it must be refused (a non-zero
exit status, one line on stderr naming the directory and the running server's pid, which stays in
DIR/LOCK) and the running server must still answer; the next restart's checks then cover what it
acknowledged before and after.
Every request the workload sends is tracked: *acknowledged* (a reply came back) or *in doubt*
(sent; no reply, the connection died). After each restart the harness checks:

 1. every acknowledged row is present exactly once, an in-doubt batch is present entirely or not
    at all (never partly, never twice), and there are no other rows;
 2. re-sending every in-doubt batch with its original (writer_id, batch_id) makes it present exactly
    once (the idempotency tables survived): the reply says `duplicate` exactly when it was already
    there; re-sending an acknowledged batch is answered `duplicate` and changes nothing;
 3. latest_slide never goes backwards across restarts and is >= every slide number acknowledged;
    a re-sent acknowledged slide key returns the same slide number and does not slide;
 4. COUNT(*), SUM (exact: values near +-2^62 and +-2^63 make the sums leave int64), MIN, MAX,
    COUNT(DISTINCT) and a GROUP BY over the string column equal a reference computed here with
    Python ints from the rows known to be present;
 5. periodic queries registered and acknowledged still exist with the same id and text; ones
    acknowledged as unregistered are gone; an in-doubt registration exists at most once;
 6. a periodic query's answer log (ReadAnswers) holds each slide at most once, in slide order, and
    an answer for a slide read at an earlier verification has the same rows now (the window of a
    slide never changes; an answer not yet durable at the kill may be gone, never altered).

Two streams:
  m  clock='manual', sub-windows by time, written by 1-2 writer threads and slid (with keys) by a
     slider thread. The window has more sub-windows than the run can ever slide, so no row ever
     expires: the check is on the set of rows. Rows in the open buffer are invisible to queries,
     so verification first seals it with a keyed slide of its own (and counts that slide).
  c  count-based (a slide every C_ROWS rows, by itself), one writer thread, a small window: rows
     DO expire, and since a single sequential writer fixes the order of the rows, the harness
     knows exactly which rows are live, which are buffered and what latest_slide must be.

After the last kill is verified the server is stopped cleanly (SIGTERM), started once more and
verified again, writes included (--no-clean-restart skips this).

--fsync interval / off: there an acknowledged write may be lost when the *machine* crashes (it
may still be only in the page cache), but NOT when the *process* is killed: the server wrote it
with write(2) before acknowledging and the kernel keeps it. This harness only kills the process,
so exactly the same checks apply under every fsync policy.

The run is seeded (--seed fixes every random choice: modes, delays, batch sizes, settings), but
thread and kill timing are real, so two runs of one seed are similar, not identical. On a failure
the work directory is kept: `data/` (the store as the failing restart left it),
`crash-image/` (a copy of `data/` taken right before that restart: what the kill left on disk;
`windowstore serve --data-dir <copy of it>` recovers from exactly that), `ops.jsonl` (every
request with its outcome) and `server.log` (every server's stderr, -v). Exit status 1 on any
failure; the last line is always "N passed, M failed" (N: kills whose restart was verified).

--work-around-empty-segment (off by default) deletes, before each restart, a last log segment
that holds only its magic, to look past a known server bug; see Harness.remove_empty_last_segment.
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

from windowstore.clients import Client, WindowStoreError
from windowstore.server.process import ServerProcess
from windowstore.txn.sharing import SharingMode

SCHEMA = {"ts": "int64", "k": "string", "v": "int64"}
KEYS = ["a", "b", "é", "日本", "long-" + "x" * 24]   # string column: the dictionary must survive too
M, C = "m", "c"                 # the manual stream and the count-based stream
C_ROWS, C_SUBWINDOWS = 16, 8    # stream c: a slide every 16 rows, 8 sub-windows (128 live rows)
MAX_WORKLOAD_SLIDES = 4         # keyed slides of m per cycle by the slider thread
MAX_LIVE_QUERIES = 4            # periodic queries alive at once
CALL_TIMEOUT_S = 20.0           # per RPC; a killed server fails calls at once, this only bounds hangs
WORKLOAD_DEADLINE_S = 8.0       # a workload thread stops by itself after this
FULL_CHECK_ROWS = 20_000        # up to this many rows in m, every verification checks each row
FULL_CHECK_EVERY = 10           # beyond it, every 10th verification (and the last) does

# How a cycle's kill is timed (weights).
SHARING = [m.value for m in SharingMode]
MODES = {"startup": 8, "immediate": 10, "random": 30, "mid-batch": 15, "snapshot": 15, "segment": 12, "idle": 10}
INTRUDER_SHARE = 0.25           # cycles where a second server is started on the live data directory
INTRUDER_TIMEOUT_S = 60.0       # a refused second server exits by itself long before this


def value(row_id: int) -> int:
    """The v of a row: unique per row id, many of them near +-2^62 and +-2^63 (the sums of a few
    leave int64, so the store must sum exactly)."""
    r = row_id % 16
    if r == 0:
        return 2**62 + row_id
    if r == 1:
        return -(2**62) - row_id
    if r == 2:
        return 2**63 - 1 - row_id
    if r == 3:
        return -(2**63) + row_id
    return row_id


class Stop(Exception):
    """A workload thread's request failed: the thread ends (the request stays in doubt)."""


@dataclass
class Batch:
    stream: str
    writer: str
    batch_id: int
    ts: list[int]
    k: list[str]
    v: list[int]
    cycle: int

    def columns(self) -> dict:
        return {"ts": self.ts, "k": self.k, "v": self.v}

    @property
    def key(self) -> str:
        return f"({self.writer!r}, {self.batch_id}) [{len(self.v)} rows, cycle {self.cycle}]"


@dataclass
class Model:
    """What the harness knows about the store's durable contents. Workload threads update it under
    `lock`; verification runs alone."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    next_row: int = 0
    next_batch: collections.Counter = field(default_factory=collections.Counter)   # writer -> next batch id
    # stream m: rows known present (v -> k), where each came from, batches acked / in doubt
    m_rows: dict[int, str] = field(default_factory=dict)
    origin: dict[int, str] = field(default_factory=dict)     # v -> batch key, both streams (for messages)
    m_acked: list[Batch] = field(default_factory=list)
    m_doubt: list[Batch] = field(default_factory=list)
    m_checked_upto: int = 0       # row ids below this were checked row by row at a verification
    # stream c: the applied rows in append order, batches acked / in doubt
    c_rows: list[int] = field(default_factory=list)
    c_acked: list[Batch] = field(default_factory=list)
    c_doubt: list[Batch] = field(default_factory=list)
    # slides of m with keys: (writer, batch) -> slide number; in doubt: (writer, batch, max acked before)
    slides: dict[tuple[str, int], int] = field(default_factory=dict)
    slides_doubt: list[tuple[str, int, int]] = field(default_factory=list)
    max_acked_slide: int = -1
    # latest_slide that must never be undone (acked slides, acked appends' latest_slide, quiet reads)
    floor: dict[str, int] = field(default_factory=lambda: {M: -1, C: -1})
    # periodic queries: live acked id -> text; in-doubt registrations (texts) and unregistrations (ids)
    queries: dict[str, str] = field(default_factory=dict)
    query_ids_ever: set[str] = field(default_factory=set)
    reg_doubt: list[str] = field(default_factory=list)
    unreg_doubt: list[str] = field(default_factory=list)
    answers: dict[str, dict[int, list]] = field(default_factory=dict)  # query id -> slide -> rows read
    next_tag: int = 1
    # counters for the summary
    stats: collections.Counter = field(default_factory=collections.Counter)

    def new_batch(self, stream: str, writer: str, n: int, cycle: int) -> Batch:
        with self.lock:
            ids = range(self.next_row, self.next_row + n)
            self.next_row += n
            bid = self.next_batch[writer]
            self.next_batch[writer] += 1
        return Batch(stream, writer, bid, list(ids), [KEYS[i % len(KEYS)] for i in ids], [value(i) for i in ids], cycle)

    def new_batch_id(self, writer: str) -> int:
        with self.lock:
            bid = self.next_batch[writer]
            self.next_batch[writer] += 1
            return bid


class ServerOutput:
    """A server's stdout and stderr (read as they come by its ServerProcess, so its pipes never
    fill up), appended to server.log when the process is gone."""

    def __init__(self, srv: ServerProcess, log_path: str, header: str):
        self.srv, self.log_path, self.header = srv, log_path, header

    def finish(self) -> str:
        text = "".join(self.srv.output())
        with open(self.log_path, "a", encoding="utf-8") as f:
            f.write(f"===== {self.header} (exit code {self.srv.proc.returncode})\n{text}")
        return text


@dataclass
class Result:
    passed: int = 0              # kills whose restart was verified
    failed: int = 0
    kills: collections.Counter = field(default_factory=collections.Counter)   # by mode
    verifications: int = 0
    violations: list[str] = field(default_factory=list)
    seconds: float = 0.0
    workdir: str = ""
    kept: bool = False
    clean_restart: str = "not run"   # the extra restart after a clean shutdown at the end
    report: str = ""


class Harness:
    def __init__(self, kills: int, seed: int, fsync: str, workdir: str, out=sys.stdout, clean_restart: bool = True,
                 modes: list[str] | None = None):
        self.kills, self.seed, self.fsync, self.workdir, self.out = kills, seed, fsync, workdir, out
        self.clean_restart = clean_restart
        self.work_around_empty_segment = False
        self.sharing = "none"                # the server's --sharing; mixed picks one per start
        self.modes = {m: MODES[m] for m in (modes or MODES)}
        self.rng = random.Random(seed)
        self.model = Model()
        self.data = os.path.join(workdir, "data")
        self.image = os.path.join(workdir, "crash-image")
        self.log_path = os.path.join(workdir, "server.log")
        self.ops_path = os.path.join(workdir, "ops.jsonl")
        self.ops: list[dict] = []            # this cycle's requests, flushed to ops.jsonl
        self.ops_lock = threading.Lock()
        self.violations: list[str] = []
        self.vlock = threading.Lock()
        self.cycle = 0
        self.proc: subprocess.Popen | None = None     # the server we started and have not reaped
        self.t0 = time.monotonic()
        self.notes = collections.Counter()
        # m must never expire a row: more sub-windows than the run can slide (workload, the two
        # verification seals and a re-sent in-doubt slide per cycle, plus margin)
        self.m_subwindows = min(100_000, (MAX_WORKLOAD_SLIDES + 4) * (kills + 3) + 64)

    # -- bookkeeping ---------------------------------------------------------------------------
    def violation(self, msg: str) -> None:
        with self.vlock:
            self.violations.append(f"cycle {self.cycle}: {msg}")

    def record(self, **op) -> dict:
        op.update(cycle=self.cycle, t=round(time.monotonic() - self.t0, 4))
        with self.ops_lock:
            self.ops.append(op)
        return op

    def flush_ops(self) -> None:
        with self.ops_lock:
            ops, self.ops = self.ops, []
        with open(self.ops_path, "a", encoding="utf-8") as f:
            for op in ops:
                f.write(json.dumps(op, default=str) + "\n")

    def say(self, msg: str) -> None:
        if self.out is not None:
            print(msg, file=self.out, flush=True)

    # -- the server ------------------------------------------------------------------------------
    def server_args(self) -> list[str]:
        """Random snapshot settings (small: snapshots all the time), the fsync policy, and which seals
        run on the seal thread (usually all: a kill then often lands while one is in flight)."""
        fsync = self.rng.choice(["always", "interval", "off"]) if self.fsync == "mixed" else self.fsync
        mb = math.exp(self.rng.uniform(math.log(0.01), math.log(0.5)))
        seal_rows = self.rng.choice([0, 0, 1, 100, 100_000])
        args = ["-v", "--fsync", fsync, "--snapshot-every-mb", f"{mb:.4f}", "--seal-offload-rows", str(seal_rows)]
        if self.rng.random() < 0.3:
            args += ["--snapshot-every-s", "0.2"]
        sharing = self.rng.choice(SHARING) if self.sharing == "mixed" else self.sharing
        return args + ["--sharing", sharing]

    def start(self, args: list[str]) -> tuple[ServerProcess | None, ServerOutput | None]:
        """Start `windowstore serve` on the data directory; None (and a violation) if it refuses.
        First keep a copy of what the kill left on disk (crash-image/): on a failure the restart has
        already changed data/ (torn tails truncated, snapshots pruned, new writes)."""
        shutil.rmtree(self.image, ignore_errors=True)
        if os.path.isdir(self.data):
            shutil.copytree(self.data, self.image, symlinks=True)
            if self.work_around_empty_segment:
                self.remove_empty_last_segment()
        try:
            srv = ServerProcess(*args, data_dir=self.data)
        except RuntimeError as e:   # recovery refused the directory: after a kill -9 it must not
            self.violation(f"the server did not start after the kill: {e}")
            return None, None
        self.proc = srv.proc
        return srv, ServerOutput(srv, self.log_path, f"cycle {self.cycle}: serve {' '.join(args)}")

    def remove_empty_last_segment(self) -> None:
        """Opt-in (--work-around-empty-segment), off by default: delete a last log segment that
        holds nothing but the 8-byte magic. Such a file is left by a clean shutdown (WAL.roll) or by
        a kill between starting a segment and writing its first record; recovery keeps it, resumes
        at the lsn it is named after, and the first flush then fails to create that file (EEXIST):
        the server refuses every write from then on (a bug in server/wal.py). The file holds no
        record, so deleting it is what a fixed recovery would do; with it the run can look past
        that bug for others. Counted in the summary."""
        d = os.path.join(self.data, "wal")
        segs = sorted(n for n in os.listdir(d) if n.endswith(".wal")) if os.path.isdir(d) else []
        if segs and os.path.getsize(os.path.join(d, segs[-1])) == 8:
            os.remove(os.path.join(d, segs[-1]))
            self.notes["empty last segments removed (--work-around-empty-segment)"] += 1

    def kill(self, proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            proc.kill()             # SIGKILL
        proc.wait(30)
        if proc is self.proc:
            self.proc = None

    def startup_kill(self, args: list[str]) -> None:
        """Start a server and SIGKILL it while it is still starting or recovering (before or just
        after it says 'serving on'): a kill in the middle of recovery must lose nothing either."""
        with open(self.log_path, "a", encoding="utf-8") as log:
            log.write(f"===== cycle {self.cycle}: serve {' '.join(args)} (killed during start-up)\n")
            log.flush()
            proc = subprocess.Popen([sys.executable, "-m", "windowstore.server.cli", "serve", "--port", "0",
                                     "--data-dir", self.data, *args], stdout=log, stderr=log,
                                    env={**os.environ, "PYTHONUNBUFFERED": "1"})
            self.proc = proc
            time.sleep(self.rng.uniform(0.05, 0.8))
            self.kill(proc)

    # -- the run ---------------------------------------------------------------------------------
    def run(self) -> Result:
        res = Result(workdir=self.workdir)
        pending = 0       # kills not verified yet: the next restart that verifies covers them all
        try:
            for k in range(self.kills):
                self.cycle = k
                mode = self.rng.choices(list(self.modes), weights=list(self.modes.values()))[0]
                if k == 0 and mode == "startup":
                    mode = "random"       # the first start creates the streams
                args = self.server_args()
                if mode == "startup":
                    self.startup_kill(args)
                else:
                    srv, output = self.start(args)
                    if srv is None:
                        break
                    if k == 0:
                        self.setup(srv.target)
                    else:
                        res.verifications += 1
                        if not self.verify(srv.target, last=False):
                            self.kill(srv.proc)
                            output.finish()
                            break
                        res.passed, pending = res.passed + pending, 0
                    self.workload(srv, output, mode, args)
                res.kills[mode] += 1
                pending += 1
                self.flush_ops()
                if self.violations:       # the workload saw something wrong while the server ran
                    break
                if (k + 1) % 10 == 0 or k + 1 == self.kills:
                    self.say(f"  {k + 1} kills, {res.passed} verified, {self.model.next_row} rows sent, "
                             f"{time.monotonic() - self.t0:.0f} s")
            else:
                # the last kill: restart, verify, stop cleanly (SIGTERM)
                self.cycle = self.kills
                if self.restart_verify_stop(res):
                    res.passed, pending = res.passed + pending, 0
                    # one more restart after that clean shutdown, verified the same way (writes too)
                    if self.clean_restart:
                        self.cycle += 1
                        res.clean_restart = "passed" if self.restart_verify_stop(res) else "failed"
                        pending = int(res.clean_restart == "failed")
        except Exception as e:  # noqa: BLE001 - a harness or client error is a failure too, with the state kept
            import traceback
            self.violation(f"harness error: {type(e).__name__}: {e}\n{traceback.format_exc()}")
        finally:
            if self.proc is not None:        # only ever the server we started
                self.kill(self.proc)
            self.flush_ops()
        res.failed = max(1, pending) if self.violations else 0
        res.violations = list(self.violations)
        res.seconds = time.monotonic() - self.t0
        return res

    def restart_verify_stop(self, res: Result) -> bool:
        """Start, verify, stop cleanly (SIGTERM: the server takes a final snapshot and exits 0)."""
        srv, output = self.start(self.server_args())
        if srv is None:
            return False
        try:
            res.verifications += 1
            ok = self.verify(srv.target, last=True)
        finally:
            code = self.stop_clean(srv.proc)
            output.finish()
        if ok and code != 0:
            self.violation(f"clean shutdown (SIGTERM) exited with code {code}")
        return ok and code == 0

    def stop_clean(self, proc: subprocess.Popen) -> int:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            self.violation("the server did not stop within 30 s of SIGTERM")
        self.kill(proc)
        return proc.returncode

    def setup(self, target: str) -> None:
        with Client(target, timeout=CALL_TIMEOUT_S, retries=0) as ws:
            ws.create_stream(M, SCHEMA, subwindows=self.m_subwindows, subwindow_ms=1000, clock="manual",
                             group_by=["k"])
            ws.create_stream(C, SCHEMA, subwindows=C_SUBWINDOWS, subwindow_rows=C_ROWS, clock="manual")
        self.record(kind="create_streams", outcome="acked", m_subwindows=self.m_subwindows)

    # -- the workload and the kill -----------------------------------------------------------------
    def workload(self, srv: ServerProcess, output: ServerOutput, mode: str, args: list[str]) -> None:
        w = Workload(self, srv.target, mode)
        info = {"mode": mode, "args": args}
        if mode != "immediate" or self.rng.random() < 0.5:
            w.start()     # "immediate" kills half the time before any request, half as the first go out
        if mode != "immediate" and self.rng.random() < INTRUDER_SHARE:
            info["intruder"] = self.intrude(srv)
        if mode == "immediate":
            time.sleep(self.rng.uniform(0, 0.005))
        elif mode == "random":
            time.sleep(self.rng.uniform(0, 0.6))
        elif mode == "mid-batch":
            info["big_batch_seen"] = w.big_sent.wait(5)
            time.sleep(self.rng.uniform(0, 0.02))
        elif mode == "snapshot":
            info["snapshot_seen"] = self.wait_for_snapshot(3.0)
            self.notes["killed while a snapshot was being written"] += info["snapshot_seen"]
        elif mode == "segment":
            info["segment_seen"] = self.wait_for_new_segment(3.0)
            self.notes["killed right after a log segment was created"] += info["segment_seen"]
        elif mode == "idle":
            w.join(WORKLOAD_DEADLINE_S + CALL_TIMEOUT_S)
            time.sleep(self.rng.uniform(0, 0.3))
        if srv.proc.poll() is not None:
            self.violation(f"the server exited by itself (code {srv.proc.returncode}) before the kill")
        w.killed.set()            # from here on, failed requests are expected (and in doubt)
        w.stop.set()
        self.kill(srv.proc)
        w.join(CALL_TIMEOUT_S + 10)
        if w.alive():
            self.violation("a workload thread did not finish after the kill")
        output.finish()
        self.record(kind="kill", **info)

    def intrude(self, srv: ServerProcess) -> str:
        """Start a second server on the live data directory: it must be refused, say so in one line
        naming the directory and the running server's pid, and leave that pid in DIR/LOCK; the
        running server must still answer. Returns what happened (for ops.jsonl)."""
        with open(self.log_path, "a", encoding="utf-8") as log:
            log.write(f"===== cycle {self.cycle}: a second serve on the live data directory (must be refused)\n")
        proc = subprocess.Popen([sys.executable, "-m", "windowstore.server.cli", "serve", "--port", "0",
                                 "--data-dir", self.data], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate(timeout=INTRUDER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            self.violation(f"a second server on the live data directory was still running after "
                           f"{INTRUDER_TIMEOUT_S:.0f} s (started: {out.strip()!r})")
            return "not refused"
        with open(self.log_path, "a", encoding="utf-8") as log:
            log.write(f"{out}{err}(exit code {proc.returncode})\n")
        lines = err.splitlines()
        if proc.returncode == 0 or "serving on" in out:
            self.violation(f"a second server on the live data directory started (exit code {proc.returncode}): "
                           f"{out.strip()!r}")
            return "not refused"
        if len(lines) != 1 or os.path.abspath(self.data) not in lines[0] or f"pid {srv.proc.pid}" not in lines[0]:
            self.violation(f"a second server on the live data directory was refused (exit code {proc.returncode}) "
                           f"without one line naming the directory and pid {srv.proc.pid}: {err!r}")
        try:
            with open(os.path.join(self.data, "LOCK"), encoding="ascii") as f:
                holder = f.read().strip()
        except OSError as e:
            holder = str(e)
        if holder != str(srv.proc.pid):
            self.violation(f"after a second server was refused, {self.data}/LOCK says {holder!r}, "
                           f"not the running server's pid {srv.proc.pid}")
        try:
            with Client(srv.target, timeout=CALL_TIMEOUT_S, retries=0) as ws:
                ws.describe_stream(M)
        except WindowStoreError as e:
            self.violation(f"the running server did not answer after a second server was refused: {e}")
        self.notes["second servers refused on the live data directory"] += 1
        return "refused"

    def wait_for_new_segment(self, limit_s: float) -> bool:
        """Poll (bounded) for a log segment created after now that holds no record yet (just the
        8-byte magic): the server is between starting a segment and writing into it."""
        d = os.path.join(self.data, "wal")
        old = set(os.listdir(d))
        end = time.monotonic() + limit_s
        while time.monotonic() < end:
            for name in set(os.listdir(d)) - old:
                try:
                    if os.path.getsize(os.path.join(d, name)) <= 8:
                        return True
                except OSError:
                    pass
                old.add(name)
            time.sleep(0.0002)
        return False

    def wait_for_snapshot(self, limit_s: float) -> bool:
        """Poll (bounded) for a snapshot being written (snapshots/<lsn>.tmp); True if seen."""
        d = os.path.join(self.data, "snapshots")
        end = time.monotonic() + limit_s
        while time.monotonic() < end:
            try:
                if any(n.endswith(".tmp") for n in os.listdir(d)):
                    return True
            except OSError:
                pass
            time.sleep(0.0005)
        return False

    # -- verification after a restart ----------------------------------------------------------------
    def verify(self, target: str, last: bool) -> bool:
        """Checks 1-5 (module docstring) on a freshly restarted server, resolving every in-doubt
        request on the way. False (with violations recorded) on any failure."""
        before = len(self.violations)
        try:
            with Client(target, timeout=CALL_TIMEOUT_S, retries=0) as ws:
                self.verify_c(ws)
                self.verify_m(ws, last)
                self.verify_queries(ws)
        except WindowStoreError as e:
            self.violation(f"verification could not complete: {type(e).__name__}: {e}")
        self.record(kind="verify", ok=len(self.violations) == before)
        return len(self.violations) == before

    def _settle_c(self, ws: Client) -> dict:
        """Count-based slides that are due run right after the append that made them due (and after
        recovery): wait (bounded) until fewer than C_ROWS rows are buffered."""
        end = time.monotonic() + 10
        while True:
            info = ws.describe_stream(C)
            if info["buffered_rows"] < C_ROWS or time.monotonic() > end:
                return info
            time.sleep(0.01)

    def _rows_of(self, ws: Client, stream: str, where: str = "") -> dict[int, int]:
        """v -> how many rows carry it (v is unique per row, so every count must be 1)."""
        return {v: n for v, n in ws.query(f"SELECT v, COUNT(*) FROM {stream} {where} GROUP BY v").rows}

    def verify_c(self, ws: Client) -> None:
        """Stream c: one writer, so the order of its rows is known; each hypothesis (its in-doubt
        batch applied or not) gives the exact live rows, buffered count and latest_slide."""
        m = self.model
        assert len(m.c_doubt) <= 1, "one sequential writer leaves at most one batch in doubt"

        def expected(rows: list[int]) -> tuple[int, int, list[int]]:
            sealed = len(rows) // C_ROWS
            live = rows[max(0, sealed - C_SUBWINDOWS) * C_ROWS: sealed * C_ROWS]
            return sealed - 1, len(rows) - sealed * C_ROWS, live

        def observe() -> tuple[int, int, dict[int, int], dict]:
            info = self._settle_c(ws)
            return info["latest_slide"], info["buffered_rows"], self._rows_of(ws, C), info

        latest, buffered, seen, info = observe()
        if latest < m.floor[C]:
            self.violation(f"stream c: latest_slide went backwards: {latest} < {m.floor[C]} observed before the kill")
        hyps = [("not applied", m.c_rows)]
        if m.c_doubt:
            hyps.append(("applied", m.c_rows + m.c_doubt[0].v))
        match = None
        for name, rows in hyps:
            e_latest, e_buf, live = expected(rows)
            if (latest, buffered) == (e_latest, e_buf) and seen == {v: 1 for v in live}:
                match = name
                break
        if match is None:
            e_latest, e_buf, live = expected(m.c_rows)
            either = " (with or without the in-doubt batch)" if m.c_doubt else ""
            self.violation(
                f"stream c does not match the acknowledged appends{either}: "
                f"latest_slide {latest} (expected {e_latest}), buffered {buffered} (expected {e_buf}), "
                f"window_rows {info['window_rows']}; {self._diff(seen, set(live))}")
            return
        # re-send the in-doubt batch: duplicate exactly when it was applied before the kill
        for b in m.c_doubt:
            r = ws.append(C, b.columns(), writer_id=b.writer, batch_id=b.batch_id)
            self.record(kind="resend", stream=C, batch=b.key, was=match, duplicate=r.duplicate, accepted=r.accepted)
            if r.duplicate != (match == "applied") or r.accepted != len(b.v):
                self.violation(f"stream c: re-sent in-doubt batch {b.key} (it was {match}) answered "
                               f"duplicate={r.duplicate}, accepted={r.accepted}")
            m.stats[f"in-doubt batches {match}"] += 1
            m.c_rows.extend(b.v)
            m.c_acked.append(b)
            m.origin.update((v, b.key) for v in b.v)
        m.c_doubt.clear()
        # re-send acknowledged batches: duplicates, nothing changes
        for b in self._sample(m.c_acked):
            r = ws.append(C, b.columns(), writer_id=b.writer, batch_id=b.batch_id)
            if not r.duplicate or r.accepted != len(b.v):
                self.violation(f"stream c: re-sent acknowledged batch {b.key} answered duplicate={r.duplicate}, "
                               f"accepted={r.accepted}")
        latest, buffered, seen, info = observe()
        e_latest, e_buf, live = expected(m.c_rows)
        if (latest, buffered, info["window_rows"]) != (e_latest, e_buf, len(live)) or seen != {v: 1 for v in live}:
            self.violation(f"stream c after re-sending: latest_slide {latest} (expected {e_latest}), buffered "
                           f"{buffered} (expected {e_buf}), window_rows {info['window_rows']} (expected {len(live)}); "
                           f"{self._diff(seen, set(live))}")
        self._check_aggregates(ws, C, {v: "" for v in live}, by_key=False)
        m.floor[C] = max(m.floor[C], latest)

    def verify_m(self, ws: Client, last: bool) -> None:
        m = self.model
        info = ws.describe_stream(M)
        l0 = info["latest_slide"]
        if l0 < m.floor[M]:
            self.violation(f"stream m: latest_slide went backwards: {l0} < {m.floor[M]} (acknowledged or "
                           f"observed before the kill; last acknowledged slide number {m.max_acked_slide})")
        if l0 >= self.m_subwindows - 1:
            raise RuntimeError("harness: stream m slid more than its window holds (rows could expire)")
        # acknowledged slide keys: the same number again, no new slide
        for (writer, bid), number in self._sample(list(m.slides.items())):
            again = ws.slide(M, writer_id=writer, batch_id=bid)
            if again != number:
                self.violation(f"stream m: re-sent acknowledged slide ({writer!r}, {bid}) returned {again}, "
                               f"acknowledged as {number}")
        # seal the open buffer (rows there are invisible to queries) with a keyed slide of our own
        seal = self.slide(ws)
        if seal != l0 + 1:
            self.violation(f"stream m: sealing slide returned {seal}, expected {l0 + 1} (latest_slide was {l0}; "
                           "did a re-sent acknowledged slide slide again?)")
        # 1. acked rows exactly once; in-doubt batches entirely or not at all; nothing else
        full = last or m.next_row <= FULL_CHECK_ROWS or self.cycle % FULL_CHECK_EVERY == 0
        lo = 0 if full else min([m.m_checked_upto] + [b.ts[0] for b in m.m_doubt])
        seen = self._rows_of(ws, M, "" if full else f"WHERE ts >= {lo}")
        known = {v for v, _ in m.m_rows.items() if full or _row_id(v) >= lo}
        doubt_v = {v for b in m.m_doubt for v in b.v}
        lost = known - seen.keys()
        extra = seen.keys() - known - doubt_v
        dups = {v: n for v, n in seen.items() if n != 1}
        if lost:
            self.violation(f"stream m: {len(lost)} acknowledged rows lost, e.g. "
                           + ", ".join(f"v={v} of batch {m.origin[v]}" for v in sorted(lost, key=_row_id)[:5]))
        if extra:
            self.violation(f"stream m: {len(extra)} rows present that were never sent, e.g. {sorted(extra)[:5]}")
        if dups:
            self.violation("stream m: rows present more than once (v: count): "
                           + ", ".join(f"{v}: {n} (batch {m.origin.get(v, 'in doubt')})" for v, n in list(dups.items())[:5]))
        # 2. re-send in-doubt batches: duplicate exactly when present; then present exactly once
        for b in m.m_doubt:
            present = [v in seen for v in b.v]
            if any(present) and not all(present):
                self.violation(f"stream m: in-doubt batch {b.key} is partly present ({sum(present)} of {len(b.v)} rows)")
            r = ws.append(M, b.columns(), writer_id=b.writer, batch_id=b.batch_id)
            was = "applied" if all(present) else "not applied"
            self.record(kind="resend", stream=M, batch=b.key, was=was, duplicate=r.duplicate, accepted=r.accepted)
            if r.duplicate != all(present) or r.accepted != len(b.v):
                self.violation(f"stream m: re-sent in-doubt batch {b.key} ({was} before) answered "
                               f"duplicate={r.duplicate}, accepted={r.accepted}")
            m.stats[f"in-doubt batches {was}"] += 1
            self._add_m(b)
        m.m_doubt.clear()
        for b in self._sample(m.m_acked):
            r = ws.append(M, b.columns(), writer_id=b.writer, batch_id=b.batch_id)
            if not r.duplicate or r.accepted != len(b.v):
                self.violation(f"stream m: re-sent acknowledged batch {b.key} answered duplicate={r.duplicate}, "
                               f"accepted={r.accepted}")
        # in-doubt slides: re-sent, they return the number they got (or slide now if they were lost)
        for writer, bid, acked_before in m.slides_doubt:
            number = ws.slide(M, writer_id=writer, batch_id=bid)
            was = "applied" if number <= l0 else "not applied"
            self.record(kind="resend-slide", writer=writer, batch=bid, number=number, was=was)
            if was == "applied" and number <= acked_before:
                self.violation(f"stream m: in-doubt slide ({writer!r}, {bid}) returned {number}, not after the "
                               f"slide {acked_before} acknowledged before it was sent")
            m.stats[f"in-doubt slides {was}"] += 1
            m.slides[(writer, bid)] = number
            m.max_acked_slide = max(m.max_acked_slide, number)
            m.floor[M] = max(m.floor[M], number)
        m.slides_doubt.clear()
        # seal what the re-sent batches buffered, then every row known must be there exactly once
        self.slide(ws)
        seen = self._rows_of(ws, M, "" if full else f"WHERE ts >= {lo}")
        known = {v: k for v, k in m.m_rows.items() if full or _row_id(v) >= lo}
        if seen != {v: 1 for v in known}:
            self.violation(f"stream m after re-sending the in-doubt batches: {self._diff(seen, set(known))}")
        if full:
            m.stats["full row checks"] += 1
        m.m_checked_upto = m.next_row
        info = ws.describe_stream(M)
        if info["buffered_rows"] != 0 or info["window_rows"] != len(m.m_rows):
            self.violation(f"stream m: describe says window_rows {info['window_rows']}, buffered "
                           f"{info['buffered_rows']}; expected {len(m.m_rows)} and 0")
        # 4. aggregates over the whole window against the reference
        self._check_aggregates(ws, M, m.m_rows, by_key=True)
        m.floor[M] = max(m.floor[M], info["latest_slide"])

    def verify_queries(self, ws: Client) -> None:
        """5. acknowledged periodic queries exist with their id and text; nothing unaccounted for."""
        m = self.model
        listed = {q["query_id"]: q["text"] for q in ws.list_queries()}
        for qid in m.unreg_doubt:          # in doubt: gone (applied) or still there (not applied)
            if qid not in listed:
                m.queries.pop(qid, None)
        m.unreg_doubt.clear()
        for qid, text in m.queries.items():
            if listed.get(qid) != text:
                self.violation(f"acknowledged periodic query {qid} ({text!r}) "
                               + ("is gone" if qid not in listed else f"now has the text {listed[qid]!r}"))
        for text in m.reg_doubt:           # in doubt: registered at most once
            ids = [qid for qid, t in listed.items() if t == text and qid not in m.queries]
            if len(ids) > 1:
                self.violation(f"in-doubt registration {text!r} exists {len(ids)} times: {ids}")
            if ids:
                if ids[0] in m.query_ids_ever:
                    self.violation(f"in-doubt registration {text!r} got {ids[0]}, an id acknowledged before")
                m.queries[ids[0]] = text
                m.query_ids_ever.add(ids[0])
            m.stats[f"in-doubt registrations {'applied' if ids else 'not applied'}"] += 1
        m.reg_doubt.clear()
        unknown = {qid: t for qid, t in listed.items() if qid not in m.queries}
        if unknown:
            self.violation(f"periodic queries nobody registered (or acknowledged as unregistered): {unknown}")
        # 6. answer logs: one answer per slide, in order; a slide's rows never change across restarts
        for qid in list(m.answers):
            if qid not in m.queries:
                del m.answers[qid]
        for qid in m.queries:
            kept, _, _ = ws.read_answers(qid)
            slides = [a.slide for a in kept]
            if slides != sorted(set(slides)):
                self.violation(f"periodic query {qid}: its answer log holds slides {slides} (repeated or out of order)")
            seen = m.answers.setdefault(qid, {})
            for a in kept:
                if a.slide in seen and seen[a.slide] != a.rows:
                    self.violation(f"periodic query {qid}: the answer for slide {a.slide} was {seen[a.slide]}, "
                                   f"now {a.rows}")
                seen[a.slide] = a.rows
            m.stats["answers checked"] += len(kept)

    # -- verification helpers --------------------------------------------------------------------
    def slide(self, ws: Client) -> int:
        """A keyed slide of m by the verifier (acknowledged like any other)."""
        m = self.model
        bid = m.new_batch_id("verify")
        number = ws.slide(M, writer_id="verify", batch_id=bid)
        if number <= m.max_acked_slide:
            self.violation(f"stream m: new slide got number {number}, not after the acknowledged {m.max_acked_slide}")
        m.slides[("verify", bid)] = number
        m.max_acked_slide = max(m.max_acked_slide, number)
        m.floor[M] = max(m.floor[M], number)
        return number

    def _add_m(self, b: Batch) -> None:
        m = self.model
        for v, k in zip(b.v, b.k):
            m.m_rows[v] = k
            m.origin[v] = b.key
        m.m_acked.append(b)

    def _sample(self, items: list) -> list:
        """The last few and a few random older ones."""
        if len(items) <= 6:
            return list(items)
        return items[-3:] + self.rng.sample(items[:-3], 3)

    def _diff(self, seen: dict[int, int], expected: set[int]) -> str:
        lost = sorted(expected - seen.keys(), key=_row_id)
        extra = sorted(seen.keys() - expected, key=_row_id)
        dups = {v: n for v, n in seen.items() if n != 1}
        return (f"{len(lost)} missing (e.g. {[(v, self.model.origin.get(v)) for v in lost[:3]]}), "
                f"{len(extra)} unexpected (e.g. {extra[:3]}), {len(dups)} not exactly once (e.g. {list(dups.items())[:3]})")

    def _check_aggregates(self, ws: Client, stream: str, rows: dict[int, str], by_key: bool) -> None:
        """4. COUNT, exact SUM, MIN, MAX, COUNT(DISTINCT) (and per key COUNT, SUM) vs Python ints."""
        vs = list(rows)
        want = [(len(vs), sum(vs) if vs else None, min(vs, default=None), max(vs, default=None), len(set(vs)))]
        got = ws.query(f"SELECT COUNT(*), SUM(v), MIN(v), MAX(v), COUNT(DISTINCT v) FROM {stream}").rows
        if [tuple(r) for r in got] != want:
            self.violation(f"stream {stream}: COUNT, SUM, MIN, MAX, COUNT(DISTINCT) = {got}, reference {want}")
        if by_key:
            ref: dict[str, list[int]] = {}
            for v, k in rows.items():
                ref.setdefault(k, [0, 0])
                ref[k][0] += 1
                ref[k][1] += v
            got = {r[0]: [r[1], r[2]] for r in ws.query(f"SELECT k, COUNT(*), SUM(v) FROM {stream} GROUP BY k").rows}
            if got != ref:
                self.violation(f"stream {stream}: per-key COUNT, SUM = {got}, reference {ref}")


def _row_id(v: int) -> int:
    """The row id a value was made from (inverse of value())."""
    if v >= 2**63 - 2**40:
        return 2**63 - 1 - v
    if v >= 2**62:
        return v - 2**62
    if v < -(2**63) + 2**40:
        return v + 2**63
    if v <= -(2**62):
        return -(2**62) - v
    return v


class Workload:
    """The writers of one cycle, each on its own connection, bounded in requests and time:
    1-2 appenders to m (with occasional reads), an appender to c, a slider of m that also
    registers and unregisters periodic queries."""

    def __init__(self, h: Harness, target: str, mode: str):
        self.h, self.target, self.mode = h, target, mode
        self.model = h.model
        self.stop = threading.Event()      # the kill came (or is coming): send nothing more
        self.killed = threading.Event()    # set just before SIGKILL: errors after it are expected
        self.big_sent = threading.Event()  # mid-batch mode: the big batch is being sent
        self.deadline = time.monotonic() + WORKLOAD_DEADLINE_S
        rng = h.rng
        writers = rng.choice([1, 2])
        big_writer = rng.randrange(writers) if mode == "mid-batch" else -1
        self.threads = [threading.Thread(target=self._guard, args=(self.m_writer, f"w{i}", random.Random(rng.random()),
                                                                   rng.randint(5, 40), i == big_writer), daemon=True)
                        for i in range(writers)]
        self.threads.append(threading.Thread(target=self._guard, args=(self.c_writer, "cw", random.Random(rng.random()),
                                                                       rng.randint(3, 30)), daemon=True))
        self.threads.append(threading.Thread(target=self._guard, args=(self.slider, "s", random.Random(rng.random()),
                                                                       rng.randint(3, 14)), daemon=True))

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def join(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        for t in self.threads:
            if t.ident is not None:
                t.join(max(0.0, end - time.monotonic()))

    def alive(self) -> bool:
        return any(t.is_alive() for t in self.threads)

    def _guard(self, fn, *args) -> None:
        try:
            with Client(self.target, timeout=CALL_TIMEOUT_S, retries=0) as ws:
                fn(ws, *args)
        except Stop:
            pass
        except Exception as e:  # noqa: BLE001 - a harness bug must show, not vanish with the thread
            import traceback
            self.h.violation(f"workload thread {args[0]}: {type(e).__name__}: {e}\n{traceback.format_exc()}")

    def _go(self) -> bool:
        return not self.stop.is_set() and time.monotonic() < self.deadline

    def send(self, op: dict, fn):
        """One request. Returns its reply; on an error the request stays in doubt and the thread
        stops (raises Stop). An error while the server was up (not killed yet) is a violation."""
        try:
            result = fn()
        except Exception as e:  # noqa: BLE001 - any failure of the call leaves the request in doubt
            op["outcome"] = "doubt"
            op["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            if not self.killed.is_set():
                self.h.violation(f"{op['kind']} by {op['thread']} failed while the server was up: {op['error']}")
            raise Stop from None
        op["outcome"] = "acked"
        return result

    # -- threads -----------------------------------------------------------------------------------
    def m_writer(self, ws: Client, name: str, rng: random.Random, budget: int, big: bool) -> None:
        m = self.model
        latest, count = m.floor[M], 0
        big_at = rng.randrange(min(5, budget)) if big else -1
        for i in range(budget):
            if not self._go():
                return
            r = rng.random()
            if r < 0.08 and i != big_at:
                # a read: the window only grows (nothing expires in m), and holds only rows sent
                op = self.h.record(kind="query", thread=name, stream=M)
                sent = m.next_row
                n = self.send(op, lambda: ws.query(f"SELECT COUNT(*) FROM {M}").rows[0][0])
                op["count"] = n
                if n < count or n > sent:
                    self.h.violation(f"{name}: COUNT(*) over m was {n} after {count}, with {sent} rows sent so far")
                count = n
                continue
            size = rng.randint(800, 2000) if i == big_at else rng.randint(1, 30)
            b = m.new_batch(M, name, size, self.h.cycle)
            op = self.h.record(kind="append", thread=name, stream=M, batch=b.key, first_row=b.ts[0])
            if i == big_at:
                self.big_sent.set()
            try:
                ack = self.send(op, lambda: ws.append(M, b.columns(), writer_id=b.writer, batch_id=b.batch_id))
            except Stop:
                with m.lock:
                    m.m_doubt.append(b)
                raise
            op.update(accepted=ack.accepted, duplicate=ack.duplicate, latest_slide=ack.latest_slide)
            with m.lock:
                self.h._add_m(b)
                m.floor[M] = max(m.floor[M], ack.latest_slide)
            if ack.duplicate or ack.accepted != size:
                self.h.violation(f"{name}: new batch {b.key} answered duplicate={ack.duplicate}, accepted={ack.accepted}")
            if ack.latest_slide < latest:
                self.h.violation(f"{name}: append reply latest_slide {ack.latest_slide} after {latest}")
            latest = ack.latest_slide

    def c_writer(self, ws: Client, name: str, rng: random.Random, budget: int) -> None:
        m = self.model
        latest = m.floor[C]
        for _ in range(budget):
            if not self._go():
                return
            b = m.new_batch(C, name, rng.randint(1, 40), self.h.cycle)
            op = self.h.record(kind="append", thread=name, stream=C, batch=b.key, first_row=b.ts[0])
            try:
                ack = self.send(op, lambda: ws.append(C, b.columns(), writer_id=b.writer, batch_id=b.batch_id))
            except Stop:
                with m.lock:
                    m.c_doubt.append(b)
                raise
            op.update(accepted=ack.accepted, duplicate=ack.duplicate, latest_slide=ack.latest_slide)
            with m.lock:
                m.c_rows.extend(b.v)
                m.c_acked.append(b)
                m.origin.update((v, b.key) for v in b.v)
                m.floor[C] = max(m.floor[C], ack.latest_slide)
            if ack.duplicate or ack.accepted != len(b.v) or ack.latest_slide < latest:
                self.h.violation(f"{name}: new batch {b.key} answered duplicate={ack.duplicate}, "
                                 f"accepted={ack.accepted}, latest_slide={ack.latest_slide} (after {latest})")
            latest = ack.latest_slide

    def slider(self, ws: Client, name: str, rng: random.Random, budget: int) -> None:
        m = self.model
        slides = 0
        for _ in range(budget):
            if self.stop.wait(rng.uniform(0.005, 0.06)) or not self._go():
                return
            r = rng.random()
            if r < 0.55 and slides < MAX_WORKLOAD_SLIDES:
                slides += 1
                bid = m.new_batch_id(name)
                op = self.h.record(kind="slide", thread=name, stream=M, batch=bid)
                before = m.max_acked_slide
                try:
                    number = self.send(op, lambda: ws.slide(M, writer_id=name, batch_id=bid))
                except Stop:
                    m.slides_doubt.append((name, bid, before))
                    raise
                op["number"] = number
                if number <= before:
                    self.h.violation(f"slide ({name!r}, {bid}) got number {number}, not after the acknowledged {before}")
                with m.lock:
                    m.slides[(name, bid)] = number
                    m.max_acked_slide = max(m.max_acked_slide, number)
                    m.floor[M] = max(m.floor[M], number)
            elif r < 0.75 and len(m.queries) < MAX_LIVE_QUERIES:
                tag = m.next_tag
                m.next_tag += 1
                stream = rng.choice([M, C])
                text = rng.choice([
                    f"SELECT SUM(v) FROM {stream} [RANGE 3 SUBWINDOWS SLIDE 1 SUBWINDOWS] WHERE ts <> -{tag}",
                    f"SELECT k, COUNT(*), MAX(v) FROM {stream} [RANGE 2 SUBWINDOWS SLIDE 2 SUBWINDOWS] "
                    f"WHERE ts <> -{tag} GROUP BY k"])
                op = self.h.record(kind="register", thread=name, text=text)
                try:
                    q = self.send(op, lambda: ws.register(text))
                except Stop:
                    m.reg_doubt.append(text)
                    raise
                op["query_id"] = q.id
                if q.id in m.query_ids_ever:
                    self.h.violation(f"register {text!r} got the id {q.id}, acknowledged before for another query")
                m.queries[q.id] = text
                m.query_ids_ever.add(q.id)
            elif r < 0.85 and m.queries:
                qid = rng.choice(sorted(m.queries))
                op = self.h.record(kind="unregister", thread=name, query_id=qid)
                try:
                    self.send(op, lambda: ws.unregister(qid))
                except Stop:
                    m.unreg_doubt.append(qid)
                    raise
                del m.queries[qid]
            else:
                op = self.h.record(kind="list_queries", thread=name)
                listed = {q["query_id"] for q in self.send(op, ws.list_queries)}
                if not set(m.queries) <= listed:
                    self.h.violation(f"list_queries misses acknowledged queries {sorted(set(m.queries) - listed)}")


# -- entry points ------------------------------------------------------------------------------------
def run(kills: int, seed: int, fsync: str = "always", workdir: str | None = None, out=sys.stdout,
        clean_restart: bool = True, modes: list[str] | None = None, work_around_empty_segment: bool = False,
        sharing: str = "none") -> Result:
    """Run the harness; the work directory is removed on success unless it was given."""
    given = workdir is not None
    workdir = os.path.abspath(workdir) if given else tempfile.mkdtemp(prefix="windowstore-crash-")
    os.makedirs(workdir, exist_ok=True)
    if os.listdir(workdir):
        raise SystemExit(f"{workdir} is not empty: give a new or empty work directory")
    h = Harness(kills, seed, fsync, workdir, out, clean_restart, modes)
    h.work_around_empty_segment = work_around_empty_segment
    h.sharing = sharing
    h.say(f"crash test: {kills} kills, seed {seed}, fsync {fsync}, sharing {sharing}, work directory {workdir}")
    res = h.run()
    res.kept = bool(res.violations) or given
    res.report = report(h, res)
    if not res.kept:
        shutil.rmtree(workdir, ignore_errors=True)
    h.say(res.report)
    return res


def recoveries(log_path: str) -> str:
    """What the servers said about their recoveries (server.log, -v)."""
    try:
        with open(log_path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return "no server log"
    stats = [dict(re.findall(r" (\w+)=([\d.]+)", line))
             for line in text.splitlines() if " INFO recovered " in line]
    replayed = [int(s.get("replayed", 0)) for s in stats]
    return (f"{len(stats)} recoveries ({sum(1 for s in stats if int(s.get('snapshot_lsn', 0)) > 0)} from a snapshot), "
            f"log records replayed: max {max(replayed, default=0)}, total {sum(replayed)}; "
            f"torn tails truncated: {text.count('torn tail')}; incomplete new segments removed: "
            f"{text.count('incomplete new segment')}")


def report(h: Harness, res: Result) -> str:
    m = h.model
    by_mode = ", ".join(f"{k} {n}" for k, n in sorted(res.kills.items()))
    lines = [f"kills executed: {sum(res.kills.values())} ({by_mode})",
             f"restarts verified: {res.verifications} (each covers the kills since the previous one)",
             f"rows sent: {m.next_row}; stream m holds {len(m.m_rows)}, stream c {len(m.c_rows)} appended "
             f"({min(len(m.c_rows), C_ROWS * C_SUBWINDOWS)} live at most); slides of m acknowledged: {len(m.slides)}",
             "in doubt, resolved at restart: " + (", ".join(f"{k} {n}" for k, n in sorted(m.stats.items())) or "none"),
             f"restart after a clean shutdown (SIGTERM) at the end: {res.clean_restart}",
             "events: " + (", ".join(f"{k} {n}" for k, n in sorted(h.notes.items())) or "none"),
             "recovery: " + recoveries(h.log_path),
             f"runtime: {res.seconds:.1f} s"]
    if res.violations:
        lines.append(f"FAILED (seed {h.seed}, fsync {h.fsync}, in cycle {h.cycle}); violations:")
        lines += [f"  - {v}" for v in res.violations[:20]]
        if len(res.violations) > 20:
            lines.append(f"  ... {len(res.violations) - 20} more")
        lines.append(f"kept: {h.workdir} (data/: the store after the failing restart; crash-image/: the data "
                     "directory as the kill left it; ops.jsonl: every request and its outcome; server.log)")
        extra = "" if list(h.modes) == list(MODES) else f" --modes {','.join(h.modes)}"
        extra += "" if h.clean_restart else " --no-clean-restart"
        extra += " --work-around-empty-segment" if h.work_around_empty_segment else ""
        lines.append(f"reproduce: {sys.executable} tests/crash.py --kills {h.kills} --seed {h.seed} "
                     f"--fsync {h.fsync} --sharing {h.sharing}{extra} "
                     "(timing varies: the same seed makes the same choices, not the same interleaving)")
    elif res.kept:
        lines.append(f"kept: {h.workdir}")
    lines.append(f"{res.passed} passed, {res.failed} failed")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kills", type=int, default=100, help="kill -9 / restart cycles (default 100)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--fsync", choices=["always", "interval", "off", "mixed"], default="always",
                   help="the server's --fsync policy; mixed picks one per start (default always)")
    p.add_argument("--data-dir", metavar="DIR", help="work directory, kept (the store's data in DIR/data); "
                   "default: a temporary one, removed unless something failed")
    p.add_argument("--no-clean-restart", action="store_true",
                   help="skip the final check: stop cleanly (SIGTERM), restart, verify (writes included)")
    p.add_argument("--modes", default=",".join(MODES),
                   help=f"kill timings to draw from, comma-separated (default all: {','.join(MODES)})")
    p.add_argument("--work-around-empty-segment", action="store_true",
                   help="before each restart delete a last log segment holding only the magic (no record): "
                        "works around the EEXIST bug to look for others; off by default")
    p.add_argument("--sharing", choices=[*SHARING, "mixed"], default="none",
                   help="the server's --sharing (shared periodic execution); mixed picks one per start (default none)")
    args = p.parse_args(argv)
    if args.kills < 1:
        p.error("--kills must be >= 1")
    modes = args.modes.split(",")
    if not modes or any(m not in MODES for m in modes):
        p.error(f"--modes: choose from {', '.join(MODES)}")
    res = run(args.kills, args.seed, args.fsync, args.data_dir, clean_restart=not args.no_clean_restart, modes=modes,
              work_around_empty_segment=args.work_around_empty_segment, sharing=args.sharing)
    return 1 if res.failed or res.violations else 0


if __name__ == "__main__":
    sys.exit(main())
