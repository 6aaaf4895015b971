"""`make chaos`: Jepsen-style faults against automatic failover, on 127.0.0.1 only.

Three durable `windowstore serve --etcd` processes and one etcd; a stream with replication=3 and
acks=all (one partition, replicas on all three nodes). A writer appends numbered batches (batch i:
ten rows, key "b{i}", values 10 i .. 10 i + 9, writer id "w", batch id i, retried until
acknowledged) and slides the manual clock every SLIDE_EVERY batches (its own idempotency key); a
reader runs one-time queries meanwhile, and a watcher subscribes to a periodic query of the
stream through a client that follows its leader. Every server reaches etcd and each other server through a
fault-injecting proxy of its own (tests/netfault.py: its `--etcd` URL and `--peer-address`es), so
links can be cut; the harness's clients reach each server through a proxy too (the server's
`--advertise-address`, the address etcd gives clients), and etcd directly.

Faults, one at a time, chosen at random among --kinds: SIGKILL of a server (the leader half the
time) and its restart on the same data directory and port; SIGSTOP / SIGCONT of a server; SIGSTOP
/ SIGCONT of etcd; and network partitions, each a blackhole or a reset (netfault.Fault) for 0.5 s
to 3 TTL: the leader from its followers (both ways, or one way only, a blackhole), the leader from
etcd, a follower from etcd, one server (any) from all the others and etcd, and the clients from the
leader (both ways, or its answers lost: the requests arrive and are applied, the client retries
with its idempotency key). After each fault
the run waits for the writer to be acknowledged again (a fault after which writes never resume
ends the run as a failure), and, unless --overlap, for every server to be back in etcd's in-sync
set before the next fault.

Checked at the end: every acknowledged batch is in the window exactly once and nothing else is
(GROUP BY k against DuckDB over the acknowledged rows); every answer the reader got equals DuckDB
over the rows of its slide's window; and the clients' history (tests/client_history.py: the
writer's slides, the reader's queries of the youngest HISTORY_RANGE sub-windows, the slides each
reflects read from its rows) passes the isolation checker (txn/checker.py): no query torn, no
error in the history; the watcher's answers likewise equal DuckDB over their slide's rows, each
subscription's slides increase (each at most once), and no follower still holds a registration
of the periodic query (a replica that steps down unregisters it). Reported: per kind of fault, the longest time between two
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

from windowstore.clients import Client
from windowstore.clients.partitioned import ClusterClient
from windowstore.server.coordination.election import place
from windowstore.server.coordination.keys import Keys
from windowstore.server.coordination.local import LocalEtcd
from windowstore.server.coordination.view import EtcdClusterView
from windowstore.txn.kinds import Level

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from client_history import ClientHistory  # noqa: E402
from netfault import Fault, Network  # noqa: E402  # (tests/ is not a package)

SCHEMA = {"ts": "int64", "k": "string", "v": "int64"}
SUBWINDOWS = 4096
SLIDE_EVERY = 10
HISTORY_RANGE = 8  # the reader's history query reads the youngest 8 sub-windows (a short window to judge)
HISTORY_QUERY = f"SELECT ts, COUNT(*) FROM c [RANGE {HISTORY_RANGE} SUBWINDOWS] GROUP BY ts"
PERIODIC_QUERY = "SELECT COUNT(*), SUM(v) FROM c [SLIDE 1 SUBWINDOWS]"
PROCESS_KINDS = ("kill-leader", "kill", "pause", "pause-leader", "pause-etcd")
PARTITION_KINDS = ("partition-leader", "partition-leader-oneway", "partition-leader-etcd", "partition-follower-etcd",
                   "isolate", "partition-client")
KINDS = PROCESS_KINDS + PARTITION_KINDS


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One `windowstore serve` process on a fixed loopback port, its log in a file."""

    def __init__(self, node: int, root: str, ttl: int):
        self.node, self.port = node, free_port()
        self.data = os.path.join(root, f"n{node}")
        self.log_path = os.path.join(root, f"n{node}.log")
        self.args = [sys.executable, "-m", "windowstore.server.cli", "serve", "--host", "127.0.0.1", "--port",
                     str(self.port), "--data-dir", self.data, "--node", str(node), "--lease-ttl-s", str(ttl)]

    def route(self, etcd_url: str, peers: dict[int, str], advertise: str | None = None) -> None:
        """Reach etcd at `etcd_url` and node j at peers[j], and be reached by clients at `advertise`
        (the proxies that can cut the links)."""
        self.args += ["--etcd", etcd_url] + [a for j, addr in sorted(peers.items()) for a in ("--peer-address", f"{j}={addr}")]
        if advertise is not None:
            self.args += ["--advertise-address", advertise]
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
    """Appends batch i (ten rows: ts i, k "b{i}", v 10 i .. 10 i + 9) with writer id "w" and batch id
    i, each until it is acknowledged, and slides every `slide_every` batches (0: never). `acked`
    lists the acknowledged batches in order, `at` when each was; `wait_acked` waits on them."""

    def __init__(self, ws: ClusterClient, stream: str = "c", slide_every: int = SLIDE_EVERY,
                 history: ClientHistory | None = None):
        super().__init__(daemon=True, name="chaos-writer")
        self.ws, self.stream, self.slide_every = ws, stream, slide_every
        self.history = history  # each acknowledged slide, at the moment it was first sent
        self.acked: list[int] = []
        self.at: list[float] = []
        self.sub: dict[int, int] = {}  # batch -> the slide that sealed its sub-window
        self.slides: list[int] = []
        self.halt = threading.Event()
        self.errors = 0
        self.error: BaseException | str | None = None  # why it ended other than halted between batches
        self.last_tried = 0
        self.changed = threading.Condition()  # notified at each acknowledgement and when the writer ends

    def wait_acked(self, n: int, timeout: float) -> bool:
        """Until at least `n` batches are acknowledged (True), or `timeout` seconds pass or the writer
        ends first (False)."""
        with self.changed:
            return self.changed.wait_for(lambda: len(self.acked) >= n or not self.is_alive(), timeout) \
                and len(self.acked) >= n

    def _until_done(self, fn):
        while True:
            try:
                return fn()
            except Exception:  # noqa: BLE001 - past the client's failover_s: the fault lasts; try again
                self.errors += 1
                if self.halt.is_set():
                    raise

    def run(self) -> None:
        try:
            self._run()
        except BaseException as e:  # noqa: BLE001 - reported by the caller
            self.error = e
        finally:
            with self.changed:
                self.changed.notify_all()

    def _run(self) -> None:
        i, pending, slide_id = 0, [], 0
        while not self.halt.is_set():
            i += 1
            self.last_tried = i
            rows = {"ts": [i] * 10, "k": [f"b{i}"] * 10, "v": list(range(10 * i, 10 * i + 10))}
            try:
                self._until_done(lambda: self.ws.append(self.stream, rows, writer_id="w", batch_id=i))
            except Exception:  # noqa: BLE001 - halted while the batch was not acknowledged
                self.error = f"halted with batch {i} not acknowledged"
                return
            with self.changed:
                self.at.append(time.monotonic())
                self.acked.append(i)
                self.changed.notify_all()
            pending.append(i)
            if len(pending) == self.slide_every:
                slide_id += 1
                sent = time.monotonic()
                try:
                    s = self._until_done(lambda: self.ws.slide(self.stream, writer_id="slider", batch_id=slide_id))
                except Exception:  # noqa: BLE001 - halted: the slide may or may not have happened
                    return
                for b in pending:
                    self.sub[b] = s
                self.slides.append(s)
                if self.history is not None:
                    self.history.slide(sent, s)
                pending = []


class Reader(threading.Thread):
    """One-time queries every 0.2 s: the whole window's COUNT and SUM (`answers`), and, given a
    history, the batches (ts) of its youngest HISTORY_RANGE sub-windows, recorded there."""

    def __init__(self, ws: ClusterClient, history: ClientHistory | None = None):
        super().__init__(daemon=True, name="chaos-reader")
        self.ws = ws
        self.history = history
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
            if self.history is not None:
                sent = time.monotonic()
                try:
                    h = self.ws.query(HISTORY_QUERY)
                except Exception:  # noqa: BLE001 - as above: counted, not recorded (it saw nothing)
                    self.errors += 1
                    continue
                self.history.query(sent, time.monotonic(), [int(ts) for ts, _ in h.rows])


class Watcher(threading.Thread):
    """A periodic query's answers through a client that follows the leader (ClusterClient over
    etcd: after a failover it registers the query again there, follow.Resubscribing). A
    subscription that ends anyway (it could not follow within the client's failover_s) is counted
    and registered anew: each registration's answers are a segment of their own."""

    def __init__(self, ws: ClusterClient):
        super().__init__(daemon=True, name="chaos-watcher")
        self.ws = ws
        self.segments: list[list[tuple[int, int, int]]] = []  # per registration: (slide, count, sum)
        self.ended: dict[str, int] = {}  # why a subscription ended: how many times
        self.halt = threading.Event()
        self._sub = None

    def run(self) -> None:
        while not self.halt.is_set():
            try:
                q = self.ws.register(PERIODIC_QUERY)
                self._sub = self.ws.subscription(q.id)
                if self.halt.is_set():
                    break
                seg: list[tuple[int, int, int]] = []
                self.segments.append(seg)
                for a in self._sub:
                    count, total = a.rows[0]
                    seg.append((a.slide, int(count), int(total or 0)))
                why = "ended"
            except Exception as e:  # noqa: BLE001 - no leader to register on, or it could not follow: counted
                why = type(e).__name__ + ": " + str(e)[:120]
            if not self.halt.is_set():
                self.ended[why] = self.ended.get(why, 0) + 1
                self.halt.wait(0.5)  # (then registered again)

    def stop(self) -> None:
        self.halt.set()
        if self._sub is not None:
            self._sub.cancel()


def rows_of(batches) -> pa.Table:
    return pa.table({"k": [f"b{i}" for i in batches for _ in range(10)],
                     "v": [v for i in batches for v in range(10 * i, 10 * i + 10)]})


def parse(argv=None) -> argparse.Namespace:
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
    ap.add_argument("--kinds", default=",".join(KINDS), type=_kinds,
                    help=f"the kinds of fault to choose from, comma-separated (default all: {','.join(KINDS)})")
    ap.add_argument("--in-order", action="store_true", help="take the kinds in turn instead of at random")
    ap.add_argument("--min-s", type=float, default=0.5, help="the shortest a pause or partition lasts (the longest: "
                                                           "3 TTL, and at least this)")
    return ap.parse_args(argv)


def _kinds(text: str) -> list[str]:
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(f"unknown kinds {unknown}: choose among {', '.join(KINDS)}")
    return kinds


def main(argv=None) -> int:
    args = parse(argv)
    results = run(args)
    print(json.dumps(results, indent=2))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)
    if not passed(results):
        print(f"logs kept in {results['root']}")
    return 0 if passed(results) else 1


def passed(results: dict) -> bool:
    return results["failure"] is None and results.get("lost") == 0 and results.get("twice") == 0 \
        and results.get("extra") == 0 and results.get("wrong_answers") == 0 \
        and results.get("history_torn") == 0 and results.get("history_errors") == 0 \
        and results.get("periodic_wrong") == 0 and results.get("periodic_repeated") == 0 \
        and results.get("periodic_answers", 0) > 0 and not any(results.get("follower_registrations", {}).values())


def inject(kind: str, rnd: random.Random, args, servers: list[Server], etcd: LocalEtcd, net: Network,
           lead: int | None) -> str:
    """One fault of `kind`, for its random length, then its end (a restart, SIGCONT, a heal);
    returns how it was done (for the log)."""
    victim = servers[lead] if kind.endswith("leader") and lead is not None else servers[rnd.randrange(3)]
    if kind.startswith("kill"):
        victim.kill()
        time.sleep(rnd.uniform(0.5, 3.0))  # the time it stays down (a fault's length, not a wait)
        victim.start()
        return f"node {victim.node}"
    if kind == "pause-etcd":
        os.kill(etcd.process.pid, signal.SIGSTOP)
        time.sleep(rnd.uniform(0.5, 2.0 * args.ttl))
        os.kill(etcd.process.pid, signal.SIGCONT)
        return "etcd"
    if kind.startswith("pause"):
        victim.signal(signal.SIGSTOP)
        time.sleep(rnd.uniform(args.min_s, max(args.min_s, 3.0 * args.ttl)))
        victim.signal(signal.SIGCONT)
        return f"node {victim.node}"
    leader = lead if lead is not None else rnd.randrange(3)
    followers = [n for n in range(3) if n != leader]
    fault = rnd.choice(list(Fault))
    if kind == "partition-leader":
        net.isolate(leader, followers, fault)
        how = f"node {leader} | {followers}"
    elif kind == "partition-leader-oneway":
        fault = Fault.BLACKHOLE
        outward = rnd.random() < 0.5
        for f in followers:
            net.cut(leader, f, fault, one_way=True) if outward else net.cut(f, leader, fault, one_way=True)
        how = f"node {leader} -> {followers} lost" if outward else f"{followers} -> node {leader} lost"
    elif kind == "partition-leader-etcd":
        net.cut(leader, "etcd", fault)
        how = f"node {leader} | etcd"
    elif kind == "partition-follower-etcd":
        f = rnd.choice(followers)
        net.cut(f, "etcd", fault)
        how = f"node {f} | etcd"
    elif kind == "partition-client":  # the harness's clients from the leader: it keeps leading
        if fault is Fault.BLACKHOLE and rnd.random() < 0.5:
            net.cut(leader, "client", fault, one_way=True)
            how = f"node {leader} -> clients lost"
        else:
            net.cut("client", leader, fault)
            how = f"clients | node {leader}"
    else:  # isolate: one server (a minority of one) from every other and etcd
        n = rnd.randrange(3)
        net.isolate(n, [m for m in range(3) if m != n] + ["etcd"], fault)
        how = f"node {n} | all"
    time.sleep(rnd.uniform(args.min_s, max(args.min_s, 3.0 * args.ttl)))  # its length (a fault's, not a wait)
    net.heal()
    return f"{fault.value} {how}"


def wired(root: str, ttl: int, etcd: LocalEtcd, net: Network, n: int = 3) -> list[Server]:
    """`n` servers (not started) each reaching etcd and every other server through a proxy of its
    own, and reached by the clients through one ("client" -> node)."""
    servers = [Server(i, root, ttl) for i in range(n)]
    etcd_port = int(etcd.url.rsplit(":", 1)[1])
    for s in servers:
        for t in servers:
            if t is not s:
                net.link(s.node, t.node, t.port)
        net.link(s.node, "etcd", etcd_port)
        net.link("client", s.node, s.port)
    for s in servers:
        s.route(f"http://{net.address(s.node, 'etcd')}",
                {t.node: net.address(s.node, t.node) for t in servers if t is not s}, net.address("client", s.node))
    return servers


def run(args) -> dict:
    """The run `args` asks for (see parse); its results, with `root` (the servers' logs)."""
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rnd = random.Random(seed)
    root = tempfile.mkdtemp(prefix="windowstore-chaos-")
    etcd = LocalEtcd().start()
    net = Network()
    servers = wired(root, args.ttl, etcd, net)
    ws = rs = ps = writer = reader = watcher = view = None
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
        history = ClientHistory("c", SUBWINDOWS, HISTORY_RANGE)
        ps = ClusterClient(view, timeout=5, failover_s=30)
        writer, reader, watcher = Writer(ws, history=history), Reader(rs, history), Watcher(ps)
        writer.start()
        reader.start()
        watcher.start()
        done = 0
        while done < args.faults and time.monotonic() - t0 < args.max_s:
            if not writer.wait_acked(len(writer.acked) + 3, args.recover_s):  # writes go through before the next fault
                raise RuntimeError(f"no write acknowledged for {args.recover_s} s before fault {done + 1}")
            if not args.overlap:  # one fault at a time: every server back and in sync first
                if not view.wait(healed, args.recover_s):
                    raise RuntimeError(f"the cluster did not heal within {args.recover_s} s before fault {done + 1}")
            lead = view.leader("c", 0)
            kind = args.kinds[done % len(args.kinds)] if args.in_order else rnd.choice(args.kinds)
            if kind in ("kill-leader", "pause-leader") and lead is None:
                kind = kind.split("-")[0]
            start = time.monotonic()
            n_at = len(writer.acked)
            how = inject(kind, rnd, args, servers, etcd, net, lead.node if lead is not None else None)
            if not writer.wait_acked(n_at + 3, args.recover_s):
                raise RuntimeError(f"fault {done + 1} ({kind}, {how}): no write acknowledged for {args.recover_s} s "
                                   "after it")
            times = [start] + [t for t in writer.at[n_at:] if t >= start]
            gap = max(b - a for a, b in zip(times, times[1:]))
            outages.setdefault(kind, []).append(gap)
            done += 1
            after = view.leader("c", 0)
            print(f"fault {done:3d} {kind:23s} longest write gap {gap:6.2f} s (acked {len(writer.acked)}) {how}; "
                  f"leader {after.node if after else None} epoch {after.epoch if after else None}", flush=True)
    except Exception as e:  # noqa: BLE001 - reported below, then everything is stopped
        failure = f"{type(e).__name__}: {e}"
    epoch = view.partition("c", 0).epoch if view is not None else 0  # elections: epoch - 1
    results = {"seed": seed, "ttl_s": args.ttl, "overlap": args.overlap, "kinds": list(args.kinds),
               "faults": sum(map(len, outages.values())), "elapsed_s": round(time.monotonic() - t0, 1),
               "failure": failure, "root": root}
    try:
        net.heal()
        if writer is not None:
            writer.halt.set()
            reader.halt.set()
            writer.join(120)
            reader.join(120)
            watcher.stop()
            watcher.join(120)
            acked = list(writer.acked)
            results["acked_batches"] = len(acked)
            results["writer_retries"] = writer.errors
            results["reader_errors"] = reader.errors
            results["reader_error_kinds"] = dict(sorted(reader.why.items(), key=lambda kv: -kv[1])[:5])
            results["acked_per_s"] = round(len(acked) / max(1e-9, time.monotonic() - t0), 1)
            if failure is None:
                results.update(check(ws, writer, reader))
                results.update(check_history(writer))
                results.update(check_periodic(watcher, writer, view, servers))
    except Exception as e:  # noqa: BLE001
        results["check_error"] = f"{type(e).__name__}: {e}"
    finally:
        for c in (ws, rs, ps):
            if c is not None:
                c.close()
        if view is not None:
            view.close()
        for s in servers:
            s.stop()
        net.close()
        etcd.stop()
    results["resets"] = net.resets
    results["epoch"] = epoch
    results["outage_s"] = {k: {"n": len(v), "median": round(statistics.median(v), 2), "max": round(max(v), 2),
                               "p95": round(sorted(v)[max(0, math.ceil(0.95 * len(v)) - 1)], 2)} for k, v in sorted(outages.items())}
    if passed(results):
        shutil.rmtree(root, ignore_errors=True)
    return results


def healed(v: EtcdClusterView) -> bool:
    """Every server live, a leader, and every replica in its in-sync set."""
    state = v.partition("c", 0)
    return len(v.live()) == 3 and state.leader is not None and set(state.in_sync or ()) == {0, 1, 2}


def check_history(writer: Writer) -> dict:
    """The clients' history through the isolation checker (tests/client_history.py)."""
    report = writer.history.check(dict(writer.sub))
    torn = report.violations(Level.WS)
    return {"history": report.summary(), "history_torn": len(torn), "history_errors": len(report.errors),
            "history_examples": [f"{v.txn}: read {v.versions}, latest {v.latest_at_commit}" for v in torn[:3]]
            + report.errors[:3]}


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
    checked, wrong = wrong_answers(reader.answers, writer)
    return {"lost": len(lost), "twice": len(twice), "extra": len(extra), "examples": (lost + twice + extra)[:5],
            "answers_checked": checked, "wrong_answers": len(wrong), "wrong_examples": wrong[:5]}


def wrong_answers(answers, writer: Writer) -> tuple[int, list[dict]]:
    """(answers checked, those wrong): each (slide, COUNT, SUM) against DuckDB over the rows of the
    sub-windows its slide's window holds."""
    subs = dict(writer.sub)
    wrong, checked = [], 0
    for s, count, total in answers:
        if s > max(writer.slides, default=-1):
            continue  # (a slide the writer had not heard acknowledged when it stopped)
        batches = [b for b, k in subs.items() if s - SUBWINDOWS < k <= s]
        slide_rows = rows_of(batches)  # noqa: F841  # read by DuckDB (a replacement scan)
        n, t = duckdb.sql("SELECT COUNT(*), COALESCE(SUM(v), 0) FROM slide_rows").fetchall()[0]
        checked += 1
        if (count, total) != (int(n), int(t)):
            wrong.append({"slide": s, "got": [count, total], "want": [int(n), int(t)]})
    return checked, wrong


def check_periodic(watcher: Watcher, writer: Writer, view: EtcdClusterView, servers: list[Server]) -> dict:
    """The watcher's answers (against DuckDB, slides increasing in each subscription), and the
    periodic queries of stream c each follower still holds (none: a replica that steps down
    unregisters them; the leader may hold a spare one, docs/failover.md)."""
    answers = [a for seg in watcher.segments for a in seg]
    checked, wrong = wrong_answers(answers, writer)
    repeated = sum(1 for seg in watcher.segments for a, b in zip(seg, seg[1:]) if b[0] <= a[0])
    # a leader cut off by the last fault steps down when it follows again: in sync means it has
    view.wait(healed, 120)
    lead = view.leader("c", 0)
    held = {}
    for s in servers:
        if lead is not None and s.node != lead.node:
            with Client(s.target, timeout=10) as c:
                held[s.node] = len([q for q in c.list_queries() if q["stream"].startswith("c")])
    return {"periodic_answers": len(answers), "periodic_checked": checked, "periodic_wrong": len(wrong),
            "periodic_wrong_examples": wrong[:5], "periodic_repeated": repeated,
            "periodic_subscriptions": len(watcher.segments), "periodic_ended": watcher.ended,
            "follower_registrations": held}


if __name__ == "__main__":
    sys.exit(main())
