"""bench/peer_bench.py's floor of a call under ingest: a no-op call to bench/bare_server.py, idle
and while a writer process sends it the peer bench's own one-second Appends at a given rate."""
import pytest

from bench.peer_bench import transport_under_ingest

pytestmark = pytest.mark.slow


def test_the_transport_is_measured_idle_and_under_a_paced_writer():
    per_s = 20.0
    got = transport_under_ingest(per_s, samples=100, busy_s=3.0)
    assert set(got) == {("bare", "idle"), ("bare", "busy"), ("bare", "appends/s")}
    for mode in ("idle", "busy"):
        p50, p99 = got[("bare", mode)]
        assert 0 < p50 <= p99
    # the writer sent the Appends (every one answered: the call raises otherwise), paced: at most
    # one a period after the first
    assert 0 < got[("bare", "appends/s")] <= per_s * 1.5
