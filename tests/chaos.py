"""`make chaos`: Jepsen-style faults against automatic failover, on 127.0.0.1 only.

Three durable `windowstore serve --etcd` processes and one etcd; a stream with replication=3 and
acks=all (one partition, replicas on all three nodes). A writer appends numbered batches (batch i:
ten rows, key "b{i}", values 10 i .. 10 i + 9, writer id "w", batch id i, retried until
acknowledged) and slides the manual clock every SLIDE_EVERY batches (its own idempotency key); a
reader runs one-time queries meanwhile. Faults, one at a time, chosen at random: SIGKILL of a
server (the leader half the time) and its restart on the same data directory and port, SIGSTOP /
SIGCONT of a server, SIGSTOP / SIGCONT of etcd. After each fault the run waits for the writer to
be acknowledged again (a fault after which writes never resume ends the run as a failure), and,
unless --overlap, for every server to be back in etcd's in-sync set before the next fault.

Checked at the end: every acknowledged batch is in the window exactly once and nothing else is
(GROUP BY k against DuckDB over the acknowledged rows); every answer the reader got equals DuckDB
over the rows of its slide's window. Reported: per kind of fault, the longest time between two
acknowledged writes around it (the time without a writable leader, as the writer saw it).
Bounded by --faults and --max-s; stops by itself and leaves nothing running.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import duckdb
import pyarrow as pa

from windowstore.clients.partitioned import ClusterClient
from windowstore.server.coordination.election import place
from windowstore.server.coordination.keys import Keys
from windowstore.server.coordination.local import LocalEtcd
from windowstore.server.coordination.view import EtcdClusterView

SCHEMA = {"ts": "int64", "k": "string", "v": "int64"}
SUBWINDOWS = 4096
SLIDE_EVERY = 10


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One `windowstore serve` process on a fixed loopback port, its log in a file."""

    def __init__(self, node: int, etcd_url: str, root: str, ttl: int):
        self.node, self.port = node, free_port()
        self.data = os.path.join(root, f"n{node}")
        self.log_path = os.path.join(root, f"n{node}.log")
        self.args = [sys.executable, "-m", "windowstore.server.cli", "serve", "--host", "127.0.0.1", "--port",
                     str(self.port), "--data-dir", self.data, "--etcd", etcd_url, "--node", str(node),
                     "--lease-ttl-s", str(ttl)]
        self.proc: subprocess.Popen | None = None
        self.stopped = False

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=log,
                                         env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.stopped = False

    def signal(self, sig) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.kill()


class Writer(threading.Thread):
    def __init__(self, ws: ClusterClient):
        super().__init__(daemon=True, name="chaos-writer")
        self.ws = ws
        self.acked: list[int] = []
        self.at: list[float] = []
        self.sub: dict[int, int] = {}  # batch -> the slide that sealed its sub-window
        self.slides: list[int] = []
        self.halt = threading.Event()
        self.errors = 0
        self.last_tried = 0

    def _until_done(self, fn):
        while True:
            try:
                return fn()
            except Exception:  # noqa: BLE001 - past the client's failover_s: the fault lasts; try again
                self.errors += 1
                if self.halt.is_set():
                    raise

    def run(self) -> None:
        i, pending, slide_id = 0, [], 0
        while not self.halt.is_set():
            i += 1
            self.last_tried = i
            rows = {"ts": [i] * 10, "k": [f"b{i}"] * 10, "v": list(range(10 * i, 10 * i + 10))}
            try:
                self._until_done(lambda: self.ws.append("c", rows, writer_id="w", batch_id=i))
            except Exception:  # noqa: BLE001 - halted while the batch was not acknowledged
                return
            self.acked.append(i)
            self.at.append(time.monotonic())
            pending.append(i)
            if len(pending) == SLIDE_EVERY:
                slide_id += 1
                try:
                    s = self._until_done(lambda: self.ws.slide("c", writer_id="slider", batch_id=slide_id))
                except Exception:  # noqa: BLE001 - halted: the slide may or may not have happened
                    return
                for b in pending:
                    self.sub[b] = s
                self.slides.append(s)
                pending = []


class Reader(threading.Thread):
    def __init__(self, ws: ClusterClient):
        super().__init__(daemon=True, name="chaos-reader")
        self.ws = ws
        self.answers: list[tuple[int, int, int]] = []  # (slide, count, sum)
        self.errors = 0
        self.why: dict[str, int] = {}
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.2):
            try:
                a = self.ws.query("SELECT COUNT(*), SUM(v) FROM c")
            except Exception as e:  # noqa: BLE001 - no leader, or the window is not sealed yet: counted
                self.errors += 1
                self.why[type(e).__name__ + ": " + str(e)[:120]] = self.why.get(type(e).__name__ + ": " + str(e)[:120], 0) + 1
                continue
            count, total = a.rows[0]
            self.answers.append((a.slide, int(count), int(total or 0)))


def rows_of(batches) -> pa.Table:
    return pa.table({"k": [f"b{i}" for i in batches for _ in range(10)],
                     "v": [v for i in batches for v in range(10 * i, 10 * i + 10)]})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--faults", type=int, default=200)
    ap.add_argument("--max-s", type=float, default=3000.0, help="stop injecting faults after this long")
    ap.add_argument("--ttl", type=int, default=2, help="the servers' lease TTL in seconds")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--recover-s", type=float, default=120.0, help="a fault after which writes do not resume "
                                                                  "within this long fails the run")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    ap.add_argument("--overlap", action="store_true", help="inject the next fault as soon as writes resume, "
                                                           "without waiting for every server to be back in sync")
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rnd = random.Random(seed)
    root = tempfile.mkdtemp(prefix="windowstore-chaos-")
    etcd = LocalEtcd().start()
    servers = [Server(i, etcd.url, root, args.ttl) for i in range(3)]
    ws = rs = writer = reader = view = None
    outages: dict[str, list[float]] = {}
    failure = None
    t0 = time.monotonic()
    try:
        for s in servers:
            s.start()
        view = EtcdClusterView(etcd.url)
        if not view.wait(lambda v: len(v.live()) == 3, 120):
            raise RuntimeError("the three servers did not register in etcd")
        place(view.etcd, Keys(), "c", [[0, 1, 2]])
        if not view.wait(lambda v: v.leader("c", 0), 60):
            raise RuntimeError("no leader elected")
        ws = ClusterClient(view, timeout=5, failover_s=30)
        rs = ClusterClient(view, timeout=5, failover_s=30)
        ws.create_stream("c", SCHEMA, subwindows=SUBWINDOWS, subwindow_ms=1000, clock="manual", partitions=1, partition_by=["k"],
                         replication=3, acks="all")
        writer, reader = Writer(ws), Reader(rs)
        writer.start()
        reader.start()
        done = 0
        while done < args.faults and time.monotonic() - t0 < args.max_s:
            before = len(writer.acked)
            deadline = time.monotonic() + args.recover_s
            while len(writer.acked) < before + 3:  # writes go through before the next fault
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no write acknowledged for {args.recover_s} s before fault {done + 1}")
                time.sleep(0.05)
            if not args.overlap:  # one fault at a time: every server back and in sync first
                def healed(v):
                    state = v.partition("c", 0)
                    return len(v.live()) == 3 and state.leader is not None and set(state.in_sync or ()) == {0, 1, 2}
                if not view.wait(healed, args.recover_s):
                    raise RuntimeError(f"the cluster did not heal within {args.recover_s} s before fault {done + 1}")
            lead = view.leader("c", 0)
            kind = rnd.choice(["kill-leader", "kill", "pause", "pause-leader", "pause-etcd"])
            start = time.monotonic()
            n_at = len(writer.acked)
            if kind in ("kill-leader", "pause-leader") and lead is None:
                kind = kind.split("-")[0]
            victim = servers[lead.node] if kind.endswith("leader") else servers[rnd.randrange(3)]
            if kind.startswith("kill"):
                victim.kill()
                time.sleep(rnd.uniform(0.5, 3.0))  # the time it stays down (a fault's length, not a wait)
                victim.start()
            elif kind.startswith("pause") and kind != "pause-etcd":
                victim.signal(signal.SIGSTOP)
                time.sleep(rnd.uniform(0.5, 3.0 * args.ttl))
                victim.signal(signal.SIGCONT)
            else:
                os.kill(etcd.process.pid, signal.SIGSTOP)
                time.sleep(rnd.uniform(0.5, 2.0 * args.ttl))
                os.kill(etcd.process.pid, signal.SIGCONT)
            deadline = time.monotonic() + args.recover_s
            while len(writer.acked) < n_at + 3:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"fault {done + 1} ({kind}): no write acknowledged for {args.recover_s} s after it")
                time.sleep(0.05)
            times = [start] + [t for t in writer.at[n_at:] if t >= start]
            gap = max(b - a for a, b in zip(times, times[1:]))
            outages.setdefault(kind, []).append(gap)
            done += 1
            print(f"fault {done:3d} {kind:13s} longest write gap {gap:6.2f} s (acked {len(writer.acked)})", flush=True)
    except Exception as e:  # noqa: BLE001 - reported below, then everything is stopped
        failure = f"{type(e).__name__}: {e}"
    results = {"seed": seed, "ttl_s": args.ttl, "overlap": args.overlap, "faults": sum(map(len, outages.values())),
               "elapsed_s": round(time.monotonic() - t0, 1), "failure": failure}
    try:
        if writer is not None:
            writer.halt.set()
            reader.halt.set()
            writer.join(120)
            reader.join(120)
            acked = list(writer.acked)
            results["acked_batches"] = len(acked)
            results["writer_retries"] = writer.errors
            results["reader_errors"] = reader.errors
            results["reader_error_kinds"] = dict(sorted(reader.why.items(), key=lambda kv: -kv[1])[:5])
            results["acked_per_s"] = round(len(acked) / max(1e-9, time.monotonic() - t0), 1)
            if failure is None:
                results.update(check(ws, writer, reader))
    except Exception as e:  # noqa: BLE001
        results["check_error"] = f"{type(e).__name__}: {e}"
    finally:
        for c in (ws, rs):
            if c is not None:
                c.close()
        if view is not None:
            view.close()
        for s in servers:
            s.stop()
        etcd.stop()
    results["outage_s"] = {k: {"n": len(v), "median": round(statistics.median(v), 2), "max": round(max(v), 2),
                               "p95": round(sorted(v)[max(0, math.ceil(0.95 * len(v)) - 1)], 2)} for k, v in sorted(outages.items())}
    print(json.dumps(results, indent=2))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)
    ok = failure is None and results.get("lost") == 0 and results.get("twice") == 0 and results.get("extra") == 0 \
        and results.get("wrong_answers") == 0
    if ok:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"logs kept in {root}")
    return 0 if ok else 1


def check(ws: ClusterClient, writer: Writer, reader: Reader) -> dict:
    slide = ws.slide("c", writer_id="slider", batch_id=10 ** 9)
    # the batches the final window holds: those sealed by its last SUBWINDOWS slides
    acked = [b for b in writer.acked if writer.sub.get(b, slide) > slide - SUBWINDOWS]
    unsure = {f"b{writer.last_tried}"} if writer.last_tried not in set(writer.acked) else set()
    got = ws.query("SELECT k, COUNT(*), SUM(v) FROM c GROUP BY k")
    assert got.slide == slide
    have = {k: (int(n), int(s)) for k, n, s in got.rows}
    expected = rows_of(acked)  # noqa: F841  # read by DuckDB (a replacement scan of the local name)
    want = {k: (int(n), int(s)) for k, n, s in
            duckdb.sql("SELECT k, COUNT(*), SUM(v) FROM expected GROUP BY k").fetchall()}
    lost = [k for k in want if k not in have]
    twice = [k for k in want if k in have and have[k] != want[k]]
    extra = [k for k in have if k not in want and k not in unsure]
    # each answer: the rows of the sub-windows its slide's window holds
    subs = dict(writer.sub)
    wrong, checked = [], 0
    for s, count, total in reader.answers:
        if s > max(writer.slides, default=-1):
            continue  # (a slide the writer had not heard acknowledged when it stopped)
        batches = [b for b, k in subs.items() if s - SUBWINDOWS < k <= s]
        slide_rows = rows_of(batches)  # noqa: F841  # read by DuckDB (a replacement scan)
        n, t = duckdb.sql("SELECT COUNT(*), COALESCE(SUM(v), 0) FROM slide_rows").fetchall()[0]
        checked += 1
        if (count, total) != (int(n), int(t)):
            wrong.append({"slide": s, "got": [count, total], "want": [int(n), int(t)]})
    return {"lost": len(lost), "twice": len(twice), "extra": len(extra), "examples": (lost + twice + extra)[:5],
            "answers_checked": checked, "wrong_answers": len(wrong), "wrong_examples": wrong[:5]}


if __name__ == "__main__":
    sys.exit(main())
