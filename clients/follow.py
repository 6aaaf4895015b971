"""Following a replicated stream's leader across a failover (docs/failover.md): the one rule every
client applies, and a periodic query's subscription that survives it.

Owns the decision whether a failed call is made again on the stream's leader, and where; holds no
channels (the clients do). Callers: ClusterClient._on_leader (each partition of a partitioned
stream), Client.call and AsyncClient.call (the stream a request names, given `etcd=` or
`follow_leader=True`), and through Client the Spark connector (its `etcd` option).
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Iterator

import grpc

from .errors import (DeadlineExceeded, FailedPrecondition, Unavailable, WindowStoreError, from_rpc_error)


def partition_of(name: str) -> tuple[str, int]:
    """("S", i) for the partition stream `S.p{i}` as the servers name it; (name, 0) for any other
    name (which etcd's map, keyed by the partitioned stream's name, then does not place)."""
    stream, sep, index = name.rpartition(".p")
    if sep and stream and index.isdigit() and str(int(index)) == index:
        return stream, int(index)
    return name, 0


_VIEWS: dict[str, object] = {}
_VIEWS_LOCK = threading.Lock()


def etcd_view(etcd):
    """A cluster view over etcd: `etcd` itself when it is one, else the view of that URL shared by
    every client of this process (one watch each, however many clients the Spark tasks open)."""
    if not isinstance(etcd, str):
        return etcd
    with _VIEWS_LOCK:
        view = _VIEWS.get(etcd)
        if view is None:
            from windowstore.server.coordination.view import EtcdClusterView

            view = _VIEWS[etcd] = EtcdClusterView(etcd)
        return view


class Following:
    """One call's following of its stream's leader (partition `partition` of `stream` in the view).

    A call refused by a replica that does not (or no longer) lead the stream (FAILED_PRECONDITION
    naming the leader) applied nothing and is made again on the leader: the one the refusal names
    (its `windowstore-leader` metadata), else the one etcd names once it changes (or after a
    second). A call that found the leader unreachable, paused or fenced (UNAVAILABLE, a deadline)
    may have been applied, so it is made again only when `sure` (a read, or a write with an
    idempotency key, which keeps it exactly once). All this for up to `failover_s` seconds.
    `view` is an EtcdClusterView (or None: only the leaders refusals name are followed, and only
    when `redirects`)."""

    def __init__(self, view, stream: str, partition: int, sure: bool, failover_s: float, redirects: bool = False):
        self.view = view if hasattr(view, "wait") else None
        self.stream, self.partition, self.sure = stream, partition, sure
        self.redirects = redirects
        self.active = failover_s > 0 and (self.view is not None or redirects)
        self.deadline = time.monotonic() + failover_s
        self.tried = None   # etcd's leader when the call was last sent
        self.named = ""     # the leader the last refusal named
        self._went = ""     # the address the call was last sent to
        self._hopped = False  # sent on at once to a named leader since the last wait

    def begin(self) -> None:
        """Note etcd's leader as the call is sent (wait() waits for it to change)."""
        if self.view is not None:
            self.tried = self.view.leader(self.stream, self.partition)

    def address(self, default: str) -> str:
        """Where to send the call now: the leader the last refusal named, else the one etcd names,
        else `default`."""
        self.begin()
        out = self.named or self._etcd_address() or default
        self._went = out
        return out

    def _etcd_address(self) -> str:
        if self.view is None or self.tried is None:
            return ""
        addresses = self.view.addresses
        return addresses[self.tried.node] if 0 <= self.tried.node < len(addresses) else ""

    def again(self, e: WindowStoreError) -> bool:
        """Whether the call that failed with `e` is to be made again (after wait())."""
        if not self.active or not isinstance(e, (FailedPrecondition, Unavailable, DeadlineExceeded)):
            return False
        refused = isinstance(e, FailedPrecondition)
        if time.monotonic() >= self.deadline or (refused and "leader" not in e.message) or not (refused or self.sure):
            return False
        self.named = e.leader if refused and self.redirects else ""
        self._check()
        if self.view is None:
            return bool(self.named)
        if not self.named and not self.view.partition(self.stream, self.partition).replicas:
            return False  # a stream etcd does not place: no leader to follow
        return True

    def _check(self) -> None:
        assert not self.named or self.redirects, "a refusal's leader is followed only with redirects"
        assert self.active or not (self.named or self._hopped), "an inactive following goes nowhere else"

    def wait(self) -> None:
        """Until the call may go to another leader: at once to a leader a refusal has just named
        (once between two waits, so replicas whose views disagree cannot bounce it to and fro),
        else until etcd names a new one (at most a second, or what is left of failover_s)."""
        if self.named and self.named != self._went and not self._hopped:
            self._hopped = True
            return
        self._hopped = False
        left = min(self.deadline - time.monotonic(), 1.0)
        if left <= 0:
            return
        if self.view is None:
            time.sleep(left)  # a refusal that names the replica already asked: its view is behind
            return
        stream, p, tried = self.stream, self.partition, self.tried
        self.view.wait(lambda v: (lambda now: now is not None and now != tried)(v.leader(stream, p)), left)
        self.named = ""  # once waited, etcd's leader is the fresher word


def follow(view, stream: str, partition: int, sure: bool, failover_s: float, call: Callable[[], object]):
    """call() (which reads where to go from the view itself), made again on the leader etcd names
    as Following says: ClusterClient's partitions."""
    f = Following(view, stream, partition, sure, failover_s)
    while True:
        f.begin()
        try:
            return call()
        except WindowStoreError as e:
            if not f.again(e):
                raise
            f.wait()


# the ends of a subscription that a failover causes: registered again on the leader
RESUMABLE = (Unavailable, FailedPrecondition)


class Resubscribing:
    """A periodic query's answers (pb.Answer) over successive Subscribe calls. When one ends with
    an error a failover causes (its server gone or paused past the call: UNAVAILABLE; the replica
    stepped down: FAILED_PRECONDITION naming the leader), `resume(error, last)` registers the
    query again on the stream's leader and returns a Subscribe call there from the kept answers
    after slide `last`, the newest passed on (SubscribeRequest.after_slide: the registration
    answers at once, maybe before the Subscribe arrives, and that answer is not lost).
    Registrations are not in the stream's replica log (server/replication/rpcs.py), so the new
    leader answers from the slide of the new registration on: slides only increase (an answer for
    a slide already passed on is dropped: each slide at most once), and the slides no
    registration answered are a gap in the slide numbers, never filled in silently. cancel() ends
    it from any thread.

    A leader that is paused (SIGSTOP, a long GC pause) or cut off neither answers nor ends its
    subscriptions. `moved()` (None, or why) says whether etcd names another leader than the server
    the call is on: when it has said so for `grace_s` with no answer meanwhile, the call is ended
    and the query registered again on the leader, as after UNAVAILABLE. The bound is the lease's:
    etcd names another leader only once the paused one's lease has expired (at most a TTL after its
    last renewal, docs/failover.md), and from then on anything the paused leader might still send
    is a deposed leader's; `grace_s` (a second) only lets a step-down that ends the call itself
    (FAILED_PRECONDITION naming the leader) come first. A stream whose SLIDE makes no answer for a
    while (a manual clock) is not taken for a stall: only etcd's word is."""

    def __init__(self, call, resume: Callable[[WindowStoreError, int], object],
                 moved: Callable[[], str | None] | None = None, grace_s: float = 1.0, poll_s: float = 0.1):
        self._call, self._resume = call, resume
        self._cancelled = False
        self._lock = threading.Lock()
        self.last = -1      # the newest slide passed on
        self.resumed = 0    # how many times it registered again
        self.why: WindowStoreError | None = None  # the error it last resumed after
        self.stalls = 0     # how many times it left a leader that neither answered nor ended the call
        self._moved, self._grace_s, self._poll_s = moved, grace_s, poll_s
        self._stalled: str | None = None  # why the current call was ended as stalled
        self._heard = time.monotonic()    # the current call's last answer (or its start)
        self._watch: threading.Thread | None = None
        self._ended = False  # the iteration is over (the watchdog stops)

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            call = self._call
        call.cancel()

    def _watchdog(self) -> None:
        """End the current call once etcd has named another leader for grace_s and no answer came
        meanwhile (see the class docstring); runs while the subscription is read."""
        since = None
        while not self._cancelled and not self._ended:
            time.sleep(self._poll_s)
            why = self._moved() if self._moved is not None else None
            now = time.monotonic()
            if why is None or self._stalled is not None:
                since = None
                continue
            since = since if since is not None else now
            if now - max(since, self._heard) >= self._grace_s:
                with self._lock:
                    call = self._call
                    self._stalled = f"no answer and etcd names another leader: {why}"
                call.cancel()
                since = None

    def cancelled(self) -> bool:
        return self._cancelled

    def __iter__(self) -> Iterator:
        if self._moved is not None and self._watch is None:
            self._watch = threading.Thread(target=self._watchdog, name="windowstore-subscription-watch", daemon=True)
            self._watch.start()
        try:
            yield from self._answers()
        finally:
            self._ended = True

    def _answers(self) -> Iterator:
        while True:
            call = self._call
            self._heard = time.monotonic()
            try:
                for a in call:
                    self._heard = time.monotonic()
                    if a.slide <= self.last:
                        continue
                    self.last = a.slide
                    self._check()
                    yield a
                return
            except grpc.RpcError as e:
                stalled = self._stalled
                if self._cancelled or not (stalled is not None or isinstance(from_rpc_error(e), RESUMABLE)):
                    raise
                self.why = Unavailable(stalled) if stalled is not None else from_rpc_error(e)
                again = self._resume(self.why, self.last)
                with self._lock:
                    self._call = again
                    self.resumed += 1
                    self.stalls += stalled is not None
                    self._stalled = None
                    if self._cancelled:
                        again.cancel()
                self._check()

    def _check(self) -> None:
        assert self.last >= -1 and self.resumed >= 0, (self.last, self.resumed)
        assert self.why is not None or self.resumed == 0, "it resumes only after an error"
        assert 0 <= self.stalls <= self.resumed, (self.stalls, self.resumed)


class Leaders:
    """What a single-address client (Client, AsyncClient) knows of its replicated streams' leaders:
    the view (etcd's, given `etcd`), whether it follows refusals (`redirects`), where each stream's
    calls last succeeded, and the periodic queries registered through it (to register them again
    after a failover: {query id: [text, priority, stream, current id, its leader's address]})."""

    def __init__(self, etcd, redirects: bool, failover_s: float, target: str):
        self.view = etcd_view(etcd) if etcd is not None else None
        self.redirects = redirects or self.view is not None
        self.failover_s = failover_s
        self.target = target
        self.on = self.redirects and failover_s > 0
        self._last: dict[str, str] = {}
        self.periodic: dict[str, list] = {}

    def following(self, stream: str, sure: bool) -> Following:
        s, p = partition_of(stream)
        return Following(self.view, s, p, sure, self.failover_s, redirects=self.redirects)

    def last(self, stream: str) -> str:
        return self._last.get(stream, self.target)

    def found(self, stream: str, address: str) -> None:
        self._last[stream] = address

    def registered(self, query_id: str, request, stream: str | None) -> None:
        """A periodic query registered on `stream`'s leader (None: not following leaders)."""
        if stream is not None:
            self.periodic[query_id] = [request, stream, query_id, self.last(stream)]

    def at(self, query_id: str) -> tuple[str, str]:
        """(the address of the server holding the periodic query, its id there): after a failover
        the query registered again on the new leader has an id of its own."""
        entry = self.periodic.get(query_id)
        return (self.target, query_id) if entry is None else (entry[3], entry[2])

    def again(self, query_id: str):
        """(the registration request, its stream) of a periodic query registered through this
        client, to register it again on the leader; None for any other query."""
        entry = self.periodic.get(query_id)
        return None if entry is None else (entry[0], entry[1])

    def elsewhere(self, query_id: str) -> str | None:
        """Why the server holding the periodic query is not its stream's leader in etcd (it names
        another one), or None (it is, or etcd names none, or this client has no view)."""
        entry = self.periodic.get(query_id)
        if entry is None or self.view is None:
            return None
        lead = self.view.leader(*partition_of(entry[1]))
        addresses = self.view.addresses
        if lead is None or not 0 <= lead.node < len(addresses) or addresses[lead.node] == entry[3]:
            return None
        return f"node {lead.node} ({addresses[lead.node]}) leads {entry[1]!r} at epoch {lead.epoch}, not {entry[3]}"

    def moved(self, query_id: str, now_id: str) -> None:
        """The periodic query is registered again, as `now_id`, on its stream's leader."""
        entry = self.periodic[query_id]
        entry[2], entry[3] = now_id, self.last(entry[1])
        self._check()

    def _check(self) -> None:
        for qid, entry in self.periodic.items():
            assert len(entry) == 4 and entry[2] and entry[3], f"periodic query {qid}: {entry[1:]}"
        assert self.on == (self.redirects and self.failover_s > 0)


def close_views() -> None:
    """Close the views etcd_view shared (their watches), e.g. before the etcd they watch stops."""
    with _VIEWS_LOCK:
        views = list(_VIEWS.values())
        _VIEWS.clear()
    for view in views:
        view.close()  # type: ignore[attr-defined]  # an EtcdClusterView
