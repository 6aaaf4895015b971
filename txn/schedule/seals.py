"""Slides up to their install (Slides, a part of Scheduler): due and asked-for slides, the cut (T_j
begins), the seal here or as a SealJob elsewhere, fail-stop. It owns what _init_slides sets; it
must not install a sub-window or resolve conflicts (the core's Scheduler._install does).

Sealing off the scheduler's thread. A slide is a write transaction in two steps: its cut (T_j
begins: the rows of sub-window j are detached from the open buffer, the Slide's place in the log)
and its install (T_j commits: sub-window j takes its position, conflicts are resolved, the history
records the write). Sealing in between (concatenating the rows, building the synopses) touches
only the cut, which nothing changes, so with `seal_offload` set a cut of at least
`seal_offload_rows` rows is sealed as a `SealJob` elsewhere and installed when `complete()` hands
the sub-window back. Meanwhile the window is as of slide j - 1 and appends go on into slide j + 1;
queries of the stream submitted meanwhile wait for the install (a due slide still runs before the
next read), as does its next slide; other streams and their queries go on (see _waits_for_seal).
With `read_during_seal` set (the server's default), a query submitted meanwhile does not wait: it
reads the sub-windows installed (the window as of slide j - 1) and, if it is still running when
T_j commits, meets T_j at its install as any concurrent write (its policy aborts or re-scans it).
T_j has not committed while the query reads, so the query serializes before it: LWS (the window as
of its commit) holds; what it gives up is the sub-window being sealed. Under a policy that locks
windows (serial) a query still begins only on a window no seal will change.
`settle()` seals one in flight here and now, for a caller that must answer with the sub-window.
"""
from __future__ import annotations

import collections
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from windowstore.store import Stream, SubWindow
from windowstore.store.window import Cut

from ..kinds import SlideCause, Step
from ..query import StreamFailed

if TYPE_CHECKING:
    from windowstore.store import StoreError

    from ..policies import Policy
    from ..query import QueryTxn


@dataclass(eq=False)
class SealJob:
    """Sealing one slide's cut off the scheduler's thread (see the module docstring): `run()`
    builds the sub-window from the cut alone. Handed back with Scheduler.complete(job, sub)."""

    stream: Stream
    cut: Cut
    cause: SlideCause
    delay: float | None         # ms the cut came after the slide fell due (processing time)

    def run(self) -> SubWindow:
        return self.stream.window.seal_cut(self.cut)


class Slides:
    """The slide half of Scheduler (a mixin: the core and this share `self`)."""

    if TYPE_CHECKING:  # what it uses of the core (Scheduler) and of Offload
        streams: dict[str, Stream]
        active: list[QueryTxn]
        holding: list[QueryTxn]
        control: Policy
        clock: Callable[[], float]
        timer: Callable[[], float] | None
        jobs_discarded: int
        last_error: StoreError | None

        def _install(self, job: SealJob, sub: SubWindow, notify: bool) -> None: ...
        def held(self, name: str) -> bool: ...
        def fail(self, txn: QueryTxn, error: Exception) -> None: ...

    def _init_slides(self) -> None:
        self.manual_requests: dict[str, int] = {}
        # streams whose slides come only as commands (a follower replica's: its leader's Slides):
        # their own clock never makes a slide due here
        self.passive: set[str] = set()
        self.in_place: set[str] = set()  # streams whose next slide asked for is sealed in place (request_slide)
        # No slide is due on a stream whose slides fall due on the clock or on request before this
        # clock time (-inf: look): what stream_due_to_slide found when it last looked at every
        # stream. Only an added stream or a request makes one due sooner; a cut makes the next later.
        # The streams whose slides fall due on their rows are looked at every time (_due_on_rows).
        self._quiet_until = -math.inf
        self._due_on_rows: dict[str, None] = {}
        self.slide_delays: dict[str, collections.deque] = {}
        self.seal_ms: dict[str, collections.deque] = {}  # how long each seal took (when measured)
        self.last_seal_ms: float | None = None  # ... the last one installed
        self.last_slide_delay: float | None = None  # ms the last slide came after it fell due (processing time)
        # Called when a slide step() applies begins, with its cut and cause ('due' on its clock, or
        # 'manual'): the engine logs it as a command; and when it is installed, with the sub-window.
        self.on_cut: Callable[[str, Cut, str], None] | None = None
        self.on_slide: Callable[[str, SubWindow], None] | None = None
        # Where the seals of cuts of at least seal_offload_rows rows run (see the module docstring);
        # None: inline. The slides being sealed, by stream.
        self.seal_offload: Callable[[SealJob], None] | None = None
        self.seal_offload_rows = 100_000
        self.sealing: dict[str, SealJob] = {}
        # Queries of a stream being sealed read what is installed instead of waiting for the
        # install (see the module docstring); False: they wait for it.
        self.read_during_seal = False
        self.seals_offloaded = 0
        # Streams stopped, and why: fail-stop (_seal_failed, stop_stream); their slides stop.
        self.failed: dict[str, str] = {}

    def _check_slides(self) -> None:
        """A cut is sealed at once, or in flight as the stream's one SealJob; a stopped stream has
        none in flight (a seal that raised leaves its cut uninstalled; one stopped at recovery has
        none) and no query reads it."""
        for name, stream in self.streams.items():
            w, job = stream.window, self.sealing.get(name)
            if name in self.failed:
                assert job is None, "a stopped stream has no seal in flight"
                assert not any(name in t.streams for t in self.active), "no query runs on a failed stream"
                continue
            if job is None:
                assert w.cutting is None, "a cut is sealed at once or in flight"
                continue
            assert job.stream is stream and w.cutting is job.cut and job.cut.slide == w.latest + 1
            if self.control.locks:
                assert not any(t.begun and name in t.streams for t in self.active), "locked windows are not cut"
        assert all(self.manual_requests.get(n, 0) > 0 for n in self.in_place), "sealed in place: a request pending"

    def request_slide(self, name: str, in_place: bool = False) -> None:
        """A client asks to seal the open sub-window of a manual-clock stream now; `in_place`: that
        slide is sealed where it is cut, never offloaded (its requester answers with the sub-window)."""
        self.manual_requests[name] = self.manual_requests.get(name, 0) + 1
        self._quiet_until = -math.inf
        if in_place:
            self.in_place.add(name)

    def slides_due(self, name: str) -> int:
        """Slides of `name` waiting to be applied: due on its clock, plus those asked for."""
        if name in self.passive:
            return self.manual_requests.get(name, 0)
        return self.streams[name].window.due(int(self.clock())) + self.manual_requests.get(name, 0)

    def _quiet_from_now(self) -> float:
        """Until when no slide can fall due on a stream whose slides come on the clock or on
        request, the state unchanged (-inf while a slide is asked for: one that waits for an
        install or a query's commit is due once it ends). Every processing-time stream is counted,
        whatever waits on it: its next slide's time is due's (due > 0 from next_due_ms on)."""
        if any(n > 0 for n in self.manual_requests.values()):
            return -math.inf
        due = math.inf
        for stream in self.streams.values():
            d = stream.window.next_due_ms()
            if d is not None and d < due:
                due = d
        return due

    def next_due(self) -> tuple[float, Stream | None]:
        """The clock time of the next processing-time slide and its stream ((inf, None): none;
        a stream being sealed is left out)."""
        due, first = math.inf, None
        for stream in self.streams.values():
            if stream.name in self.sealing or stream.name in self.failed or stream.name in self.passive:
                continue  # its next slide waits for the install (or never comes, or comes as a command)
            if self.holding and self.held(stream.name):
                continue  # ... or for the commit of a query holding its window (Outcomes._fall_back)
            d = stream.window.next_due_ms()
            if d is not None and d < due:
                due, first = d, stream
        return due, first

    def _slide(self, name: str) -> Step:
        """Begin (and unless offloaded, commit) the slide due on `name`: 'slide', or 'error' when
        sealing it raised (the stream failed; last_error says why)."""
        stream = self.streams[name]
        cause, in_place = SlideCause.DUE, False
        if self.manual_requests.get(name, 0) > 0 and stream.window.due(int(self.clock())) == 0:
            self.manual_requests[name] -= 1
            cause, in_place = SlideCause.MANUAL, name in self.in_place
            self.in_place.discard(name)
        job = self._cut(stream, cause)
        if self.on_cut is not None:
            self.on_cut(name, job.cut, cause)
        if not in_place and self.seal_offload is not None and job.cut.rows >= self.seal_offload_rows:
            self.sealing[name] = job
            self.seals_offloaded += 1
            self._reselect = True  # its queries wait
            self.seal_offload(job)
            return Step.SLIDE
        return Step.SLIDE if self._seal_here(job) else Step.ERROR

    def apply_slide(self, name: str) -> SubWindow:
        """Write transaction T_j on `name`, now and at once (replay): cut, seal and install."""
        assert name not in self.sealing, "a slide of this stream is being sealed"
        job = self._cut(self.streams[name], SlideCause.DUE)
        sub = self._timed_seal(job)
        self._install(job, sub, notify=False)
        return sub

    def settle(self, name: str) -> None:
        """Seal the slide of `name` in flight here and now and install it (its job's own result,
        when it comes back, is discarded): for a caller that must answer with the sub-window."""
        job = self.sealing.get(name)
        if job is not None:
            self._seal_here(job)

    def _cut(self, stream: Stream, cause: SlideCause) -> SealJob:
        """T_j begins: its rows are cut from the open buffer (Window.cut)."""
        now = self.clock()
        due_at = stream.window.next_due_ms()
        cut = stream.window.cut(int(now))
        self.last_rows = cut.rows
        return SealJob(stream, cut, cause, None if due_at is None else max(0.0, now - due_at))

    def _seal_here(self, job: SealJob) -> bool:
        """Seal job's cut on this thread and install it; False when sealing raised (the stream
        failed: _seal_failed)."""
        try:
            sub = self._timed_seal(job)
        except Exception as e:  # noqa: BLE001 - one stream's defect must not stop the others
            self._seal_failed(job, e)
            return False
        self._install(job, sub, notify=True)
        return True

    def _seal_failed(self, job: SealJob, error: Exception) -> None:
        """Fail-stop for the stream: its cut stays uninstalled and it slides no more; the queries
        reading it fail now (none may wait for a slide that will not come), as do its later
        queries and writes (the engine refuses them) until it is dropped. Replay from the log
        seals the same cut again, so a restart retries it."""
        name = job.stream.name
        if self.sealing.get(name) is job:
            del self.sealing[name]
        self.stop_stream(name, f"stream {name!r} stopped: sealing its slide {job.cut.slide} failed "
                               f"({type(error).__name__}: {str(error)[:200]})", error)

    def stop_stream(self, name: str, why: str, cause: BaseException | None = None) -> None:
        """Fail-stop for one stream: it slides no more, the queries reading it fail now, and the
        engine refuses its later writes and queries (StreamFailed, saying `why`) until it is
        dropped. The other streams go on."""
        self.failed[name] = why
        self.manual_requests.pop(name, None)
        self.in_place.discard(name)
        self.last_error = StreamFailed(why)
        self.last_error.__cause__ = cause
        for txn in [t for t in self.active if name in t.streams]:
            self.fail(txn, self.last_error)
        self._reselect = True

    def _timed_seal(self, job: SealJob) -> SubWindow:
        self.last_seal_ms = None
        if self.timer is None:
            return job.run()
        t0 = self.timer()
        sub = job.run()
        self._note_seal(job, (self.timer() - t0) * 1000.0)
        return sub

    def _note_seal(self, job: SealJob, ms: float) -> None:
        self.last_seal_ms = ms
        self.seal_ms[job.stream.name].append(ms)

    def _sealed(self, job: SealJob, sub: SubWindow | None, error: BaseException | None, ms: float | None) -> Step:
        name = job.stream.name
        if self.sealing.get(name) is not job:  # settled here already, or its stream dropped
            self.jobs_discarded += 1
            return Step.DISCARDED
        if error is not None:
            # sealing is a pure function of the cut: seal again here (memory may have run out there)
            return Step.SLIDE if self._seal_here(job) else Step.ERROR
        self.last_seal_ms = None
        if ms is not None:
            self._note_seal(job, ms)
        self._install(job, sub, notify=True)  # type: ignore[arg-type]  # no error: sealed
        return Step.SLIDE
