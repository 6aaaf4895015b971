"""A window's shape as created (WindowSpec): how many sub-windows, how long each is (in time or in
rows), its clock and allowed lateness, the per-key synopses it keeps, the partition it is of; its
validation against the stream's schema, and the event times such a shape can bound in int64. It
holds no window state and must not touch any (store/window.py owns the window).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import InvalidInput, OutOfRange
from .exact import INT64_MAX, INT64_MIN
from .kinds import Clock
from .schema import Schema

CLOCKS = tuple(Clock)
MAX_SUBWINDOWS = 100_000
MAX_MS = 366 * 24 * 3_600_000  # the longest sub-window (and lateness) accepted: a year
MAX_LAST_ROWS = 10_000               # rows kept per key for partitioned windows
MAX_LAST_ROWS_KEYS = 10_000_000      # keys whose last rows a stream may keep
DEFAULT_LAST_ROWS_KEYS = 100_000
MAX_LAST_ROWS_HELD = 10_000_000      # last_rows * keys: the rows kept beyond the window


@dataclass(frozen=True)
class WindowSpec:
    subwindows: int
    subwindow_ms: int | None = None
    subwindow_rows: int | None = None
    clock: Clock = Clock.PROCESSING  # a plain string (the wire's, the log's) becomes its Clock
    allowed_lateness_ms: int = 0
    group_by: tuple[str, ...] = ()
    topk: int = 16
    # One partition of a partitioned stream (store/partitions.py): of which stream, which of how
    # many, split by which columns. partitions == 0: an ordinary stream.
    partition_of: str = ""
    partition: int = 0
    partitions: int = 0
    partition_by: tuple[str, ...] = ()
    # Processing time: number sub-window slots from this instant's slot rather than the creation's,
    # so the partitions of a stream, created one after another, count the same slides.
    origin_ms: int | None = None
    # Partitioned windows ([PARTITION BY a ROWS n], store/last_rows.py): keep the last `last_rows`
    # rows of each key of `last_rows_by` beyond the time window, for at most `last_rows_keys` keys
    # (0: DEFAULT_LAST_ROWS_KEYS).
    last_rows: int = 0
    last_rows_by: tuple[str, ...] = ()
    last_rows_keys: int = 0
    # Sketches per column (store/sketch_columns.py): sorted (column, kind, size) tuples, built when a
    # sub-window is sealed; a mapping column -> kind or (kind, size) is taken too.
    sketches: tuple = ()

    def __post_init__(self) -> None:
        for name in ("group_by", "partition_by", "last_rows_by"):  # lists when read back from JSON
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))
        if not isinstance(self.sketches, tuple) or self.sketches:  # (JSON's [] too)
            from .sketch_columns import normalize
            object.__setattr__(self, "sketches", normalize(self.sketches))
        if isinstance(self.clock, str) and self.clock in CLOCKS:  # (others: validate() names them)
            object.__setattr__(self, "clock", Clock(self.clock))

    def validate(self, schema: Schema) -> None:
        if not isinstance(self.subwindows, int) or not 1 <= self.subwindows <= MAX_SUBWINDOWS:
            raise InvalidInput(f"subwindows must be between 1 and {MAX_SUBWINDOWS}, got {self.subwindows!r}")
        if (self.subwindow_ms is None) == (self.subwindow_rows is None):
            raise InvalidInput("give exactly one of subwindow_ms (time-based) or subwindow_rows (count-based)")
        if self.subwindow_ms is not None and not (isinstance(self.subwindow_ms, int) and 1 <= self.subwindow_ms <= MAX_MS):
            raise InvalidInput(f"subwindow_ms must be between 1 and {MAX_MS} (a year), got {self.subwindow_ms!r}")
        if self.subwindow_rows is not None and not (isinstance(self.subwindow_rows, int)
                                                    and 1 <= self.subwindow_rows <= 2**31):
            raise InvalidInput(f"subwindow_rows must be between 1 and {2**31}, got {self.subwindow_rows!r}")
        if self.clock not in CLOCKS:
            raise InvalidInput(f"clock must be one of {', '.join(CLOCKS)}, got {self.clock!r}")
        if self.subwindow_rows is not None and self.clock != Clock.MANUAL and self.clock != Clock.PROCESSING:
            raise InvalidInput("count-based windows slide every subwindow_rows rows; use the default clock")
        if not 0 <= self.allowed_lateness_ms <= MAX_MS:
            raise InvalidInput(f"allowed_lateness_ms must be between 0 and {MAX_MS}")
        if self.allowed_lateness_ms < 0:
            raise InvalidInput("allowed_lateness_ms must be >= 0")
        if self.allowed_lateness_ms and self.clock != Clock.EVENT:
            raise InvalidInput("allowed_lateness_ms applies only to clock='event'")
        if not 1 <= self.topk <= 10_000:
            raise InvalidInput("topk must be between 1 and 10000")
        types = schema.types
        for g in self.group_by:
            if g not in types:
                raise InvalidInput(f"group_by names unknown column {g!r}", column=g)
            if types[g] == "float64":
                raise InvalidInput(f"group_by column {g!r} must be string or int64", column=g)
        if len(set(self.group_by)) != len(self.group_by):
            raise InvalidInput("group_by names a column twice")
        if self.sketches:
            from .sketch_columns import validate
            validate(self.sketches, types, schema.time_column)
        self._validate_partition(types)
        self._validate_last_rows(types)

    def _validate_last_rows(self, types: dict[str, str]) -> None:
        if not (isinstance(self.last_rows, int) and 0 <= self.last_rows <= MAX_LAST_ROWS):
            raise OutOfRange(f"last_rows must be between 0 and {MAX_LAST_ROWS}, got {self.last_rows!r}",
                             field="last_rows", limit=MAX_LAST_ROWS)
        if not (isinstance(self.last_rows_keys, int) and 0 <= self.last_rows_keys <= MAX_LAST_ROWS_KEYS):
            raise OutOfRange(f"last_rows_keys must be between 0 and {MAX_LAST_ROWS_KEYS}, got {self.last_rows_keys!r}",
                             field="last_rows_keys", limit=MAX_LAST_ROWS_KEYS)
        if bool(self.last_rows) != bool(self.last_rows_by):
            raise InvalidInput("give last_rows (how many rows per key) and last_rows_by (the key columns) together")
        if self.last_rows_keys and not self.last_rows:
            raise InvalidInput("last_rows_keys needs last_rows and last_rows_by")
        if self.last_rows * self.keys_limit > MAX_LAST_ROWS_HELD:
            raise OutOfRange(f"last_rows * last_rows_keys is {self.last_rows * self.keys_limit}, more than the "
                             f"{MAX_LAST_ROWS_HELD} rows a stream may keep beyond its window", field="last_rows_keys",
                             limit=MAX_LAST_ROWS_HELD)
        if len(set(self.last_rows_by)) != len(self.last_rows_by):
            raise InvalidInput("last_rows_by names a column twice")
        for c in self.last_rows_by:
            if c not in types:
                raise InvalidInput(f"last_rows_by names unknown column {c!r}", column=c)
            if types[c] == "float64":
                raise InvalidInput(f"last_rows_by column {c!r} must not be float64", column=c)

    @property
    def keys_limit(self) -> int:
        """The most keys whose last rows are kept (last_rows_keys, or its default)."""
        return self.last_rows_keys or DEFAULT_LAST_ROWS_KEYS

    def _validate_partition(self, types: dict[str, str]) -> None:
        from .partitions import KEY_TYPES, MAX_PARTITIONS

        if self.origin_ms is not None and not (isinstance(self.origin_ms, int) and abs(self.origin_ms) < 2**62):
            raise InvalidInput(f"origin_ms must be an int64 instant in ms, got {self.origin_ms!r}")
        if self.origin_ms is not None and (self.clock not in ("processing", "event") or self.count_based):
            raise InvalidInput("origin_ms applies only to time sub-windows with clock='processing' or 'event'")
        if not self.partitions:
            if self.partition_of or self.partition or self.partition_by:
                raise InvalidInput("partition_of, partition and partition_by need partitions")
            return
        if not 1 <= self.partitions <= MAX_PARTITIONS:
            raise InvalidInput(f"partitions must be between 1 and {MAX_PARTITIONS}, got {self.partitions}")
        if not 0 <= self.partition < self.partitions:
            raise InvalidInput(f"partition must be between 0 and {self.partitions - 1}, got {self.partition}")
        if not self.partition_of:
            raise InvalidInput("a partition needs partition_of, the partitioned stream's name")
        if not self.partition_by:
            raise InvalidInput("a partitioned stream needs partition_by, the columns whose hash places a row")
        if len(set(self.partition_by)) != len(self.partition_by):
            raise InvalidInput("partition_by names a column twice")
        for c in self.partition_by:
            if c not in types:
                raise InvalidInput(f"partition_by names unknown column {c!r}", column=c)
            if types[c] not in KEY_TYPES:
                raise InvalidInput(f"partition_by column {c!r} must be {' or '.join(KEY_TYPES)}, not {types[c]}",
                                   column=c)
        if self.count_based:
            raise InvalidInput("partitioned streams slide by time or manually (subwindow_ms); count-based "
                               "partitions would not slide together")
        if self.clock == Clock.EVENT and self.origin_ms is None:
            raise InvalidInput("an event-time partition needs origin_ms (the event time its first sub-window "
                               "starts at), so that slide k is the same window on every partition")

    @property
    def count_based(self) -> bool:
        return self.subwindow_rows is not None

    @property
    def slot_ms(self) -> int:
        """subwindow_ms of a time-based window (validate() requires it there)."""
        assert self.subwindow_ms is not None, "a count-based window has no sub-window length"
        return self.subwindow_ms

    def event_time_limits(self) -> tuple[int, int]:
        """The event times a row may carry, inclusive: every bound derived from them must be an
        int64, since answers, listings and the log carry bounds as int64. An event-time
        sub-window is [slot * t, (slot + 1) * t), so its slot's start and end must both fit; a
        count-based one ends one past its largest event time; the other clocks take their bounds
        from the server's clock, so any int64 is accepted."""
        if self.count_based:
            return INT64_MIN, INT64_MAX - 1
        if self.clock == Clock.EVENT:
            t = self.slot_ms
            first_slot = -(-INT64_MIN // t)        # the first slot whose start is >= INT64_MIN
            last_slot = INT64_MAX // t - 1         # the last slot whose end is <= INT64_MAX
            return first_slot * t, (last_slot + 1) * t - 1
        return INT64_MIN, INT64_MAX

    def check_event_times(self, ts: np.ndarray, time_column: str, bounds: tuple[int, int] | None = None) -> None:
        """Raise OutOfRange naming the column and the limit if an event time is outside
        event_time_limits(); changes nothing. `bounds`: the times' (min, max), when the caller has them."""
        if not len(ts):
            return
        lo, hi = self.event_time_limits()
        if lo == INT64_MIN and hi == INT64_MAX:
            return
        least, most = bounds if bounds is not None else (int(ts.min()), int(ts.max()))
        shape = "count-based sub-windows" if self.count_based else f"{self.subwindow_ms} ms event-time sub-windows"
        if most > hi:
            raise OutOfRange(f"event time {most} in column {time_column!r} is beyond {hi}, the latest a stream of "
                             f"{shape} can bound in int64", field=time_column, limit=hi, column=time_column)
        if least < lo:
            raise OutOfRange(f"event time {least} in column {time_column!r} is before {lo}, the earliest a stream "
                             f"of {shape} can bound in int64", field=time_column, limit=lo, column=time_column)

