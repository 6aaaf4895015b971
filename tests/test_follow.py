"""The rule every client follows a replicated stream's leader by (clients/follow.py), without
servers: which failures are retried and where, and a subscription carried across a failover
(slides increasing, each at most once, a gap left visible). The same code on real servers and a
kill: tests/test_failover_clients.py."""
from __future__ import annotations

import threading

import grpc
import pytest

from windowstore.clients.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable
from windowstore.clients.follow import Following, Resubscribing, partition_of
from windowstore.server.coordination.view import Leader
from windowstore.v1 import windowstore_pb2 as pb


class View:
    """A cluster view whose leader of ("s", 0) the test sets; wait() returns once it changes."""

    def __init__(self, leader: int | None, placed: bool = True):
        self.addresses = ["n0:1", "n1:1", "n2:1"]
        self.now = Leader(leader, 1, 7, "") if leader is not None else None
        self.placed = placed
        self.waits = 0

    def leader(self, stream, p):
        return self.now

    def partition(self, stream, p):
        return type("State", (), {"replicas": (0, 1, 2) if self.placed else ()})()

    def wait(self, predicate, timeout):
        self.waits += 1
        return predicate(self)


def test_partition_streams_map_to_their_stream_and_index():
    assert partition_of("orders.p3") == ("orders", 3)
    assert partition_of("a.b.p0") == ("a.b", 0)
    assert partition_of("orders") == ("orders", 0)
    assert partition_of("orders.p03") == ("orders.p03", 0)  # not a partition name the SDK makes
    assert partition_of("orders.px") == ("orders.px", 0)


def test_a_call_goes_to_the_leader_etcd_names():
    f = Following(View(2), "s", 0, sure=True, failover_s=30)
    assert f.address("default:1") == "n2:1"
    assert Following(View(None), "s", 0, sure=True, failover_s=30).address("default:1") == "default:1"


def test_a_refusal_naming_the_leader_is_sent_there_at_once():
    view = View(0)
    f = Following(view, "s", 0, sure=False, failover_s=30, redirects=True)
    assert f.address("n0:1") == "n0:1"
    assert f.again(FailedPrecondition("node 0 holds a follower replica; its leader is node 1", leader="n1:1"))
    f.wait()
    assert view.waits == 0, "no wait for etcd: the refusal named where to go"
    assert f.address("n0:1") == "n1:1"
    assert f.again(FailedPrecondition("node 1 holds a follower replica; its leader is node 0", leader="n0:1"))
    f.wait()
    assert view.waits == 1, "a second refusal in a row waits for etcd: replicas that disagree cannot bounce it"


def test_an_unavailable_write_without_an_idempotency_key_is_not_retried():
    f = Following(View(0), "s", 0, sure=False, failover_s=30)
    f.address("n0:1")
    assert not f.again(Unavailable("connection refused"))
    assert Following(View(0), "s", 0, sure=True, failover_s=30).again(Unavailable("connection refused"))


def test_other_errors_and_refusals_that_name_no_leader_are_raised():
    f = Following(View(0), "s", 0, sure=True, failover_s=30)
    assert not f.again(InvalidArgument("bad column"))
    assert not f.again(NotFound("no such stream"))
    assert not f.again(FailedPrecondition("slide 3 has left the window"))


def test_a_stream_etcd_does_not_place_is_not_followed():
    assert not Following(View(0, placed=False), "s", 0, sure=True, failover_s=30).again(Unavailable("down"))


def test_nothing_is_followed_past_failover_s_or_without_a_view_or_redirects():
    assert not Following(View(0), "s", 0, sure=True, failover_s=0).again(Unavailable("down"))
    assert not Following(None, "s", 0, sure=True, failover_s=30).again(
        FailedPrecondition("its leader is node 1", leader="n1:1"))
    without_name = Following(None, "s", 0, sure=True, failover_s=30, redirects=True)
    assert not without_name.again(FailedPrecondition("node 0 stopped leading 's'; its leader is unknown"))


def test_after_an_unavailable_leader_the_call_waits_for_etcds_next_one():
    view = View(0)
    f = Following(view, "s", 0, sure=True, failover_s=30)
    assert f.address("x") == "n0:1"
    assert f.again(Unavailable("connection refused"))
    view.now = Leader(1, 2, 8, "")
    f.wait()
    assert view.waits == 1
    assert f.address("x") == "n1:1"


class Call:
    """A Subscribe call's stand-in: yields answers for `slides`, then ends or raises `error`."""

    def __init__(self, slides, error: grpc.StatusCode | None = None):
        self.slides, self.error, self.cancelled = slides, error, False

    def __iter__(self):
        for k in self.slides:
            yield pb.Answer(slide=k)
        if self.error is not None:
            raise RpcError(self.error)

    def cancel(self):
        self.cancelled = True


class RpcError(grpc.RpcError):
    def __init__(self, code):
        self._code = code

    def code(self):
        return self._code

    def details(self):
        return "test"

    def trailing_metadata(self):
        return ()


def test_a_subscription_resumed_after_a_failover_passes_each_slide_once_and_leaves_gaps_visible():
    calls = iter([Call([2, 3, 5, 6])])
    resumed_with = []

    def resume(error, last):
        resumed_with.append((type(error), last))
        return next(calls)
    sub = Resubscribing(Call([0, 1, 2], grpc.StatusCode.UNAVAILABLE), resume)
    assert [a.slide for a in sub] == [0, 1, 2, 3, 5, 6]  # slide 2 twice: passed on once; slide 4: a gap
    # the new call is asked for the kept answers after slide 2, the last passed on
    assert resumed_with == [(Unavailable, 2)] and sub.resumed == 1


def test_a_subscription_ends_with_other_errors_and_is_not_resumed_once_cancelled():
    sub = Resubscribing(Call([0], grpc.StatusCode.PERMISSION_DENIED), lambda e, last: pytest.fail("resumed"))
    with pytest.raises(grpc.RpcError):
        list(sub)
    stepped_down = Resubscribing(Call([0], grpc.StatusCode.FAILED_PRECONDITION), lambda e, last: Call([1]))
    assert [a.slide for a in stepped_down] == [0, 1]
    cancelled = Resubscribing(Call([0], grpc.StatusCode.UNAVAILABLE), lambda e, last: pytest.fail("resumed"))
    cancelled.cancel()
    with pytest.raises(grpc.RpcError):
        list(cancelled)


def test_cancel_reaches_the_call_resumed_meanwhile():
    second = Call([])
    gate = threading.Event()

    def resume(error, last):
        sub.cancel()  # cancelled while registering again
        gate.set()
        return second
    sub = Resubscribing(Call([0], grpc.StatusCode.UNAVAILABLE), resume)
    list(sub)
    assert gate.is_set() and second.cancelled


def test_a_servers_log_replays_no_registration_of_a_replicated_stream():
    """server/replication/manager.RegistrationsOfReplicas: the replicated streams are rebuilt after
    the server's own log, so their periodic queries (Register, and the Answered and Unregister of
    those ids) are left out of its replay; an id used again by a later registration is replayed."""
    from windowstore.server.replication.manager import RegistrationsOfReplicas
    from windowstore.txn.commands import Answered, Register, Unregister

    replay = RegistrationsOfReplicas({"s.p0"})
    assert not replay(Register("P1", 'SELECT COUNT(*) FROM "s.p0" [SLIDE 1 SUBWINDOWS]', 0, 0.0))
    assert not replay(Answered("P1", {}, 0.0))
    assert replay(Register("P2", "SELECT COUNT(*) FROM plain [SLIDE 1 SUBWINDOWS]", 0, 0.0))
    assert replay(Answered("P2", {}, 0.0))
    assert not replay(Unregister("P1", 0.0))
    assert replay(Register("P1", "SELECT SUM(v) FROM plain [SLIDE 1 SUBWINDOWS]", 0, 0.0))
    assert replay(Answered("P1", {}, 0.0))
