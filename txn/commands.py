"""Commands: every state change of the store as a plain, serializable value.

The engine (engine.py) applies them; the write-ahead log stores them; recovery applies them again
to an empty (or snapshot-restored) engine and gets the same state, bit for bit. Time enters as
data: every command carries the clock reading `now_ms` it was applied at.

Slides are commands too: whatever made a slide happen (the processing clock, a watermark, a row
count, a client's Slide request), the engine records the slide it applied, with its time, in the
order it happened relative to the appends around it. Replaying a Slide applies it directly.

Encoding: one version byte, one kind byte (Kind: fixed numbers, never reused), a 4-byte header
length, a JSON header, and for Append and StageRows the batch as an Arrow IPC stream.
"""
from __future__ import annotations

import enum
import json
import struct
from dataclasses import asdict, dataclass, field, fields

import pyarrow as pa

from windowstore.store.prepared import PreparedBatch
from windowstore.store.window import WindowSpec

FORMAT = 1


@dataclass(frozen=True)
class CreateStream:
    """Create stream `name` with window `spec`. The log's header holds the spec's fields flat,
    between time_column and now_ms: a field added to WindowSpec (with a default) needs nothing here,
    and older logs, without it, read as its default."""

    name: str
    columns: tuple[tuple[str, str], ...]
    time_column: str
    spec: WindowSpec
    now_ms: float


@dataclass(frozen=True)
class DropStream:
    name: str
    now_ms: float


@dataclass(frozen=True, eq=False)
class Append:
    """An accepted batch. `ipc` keeps the Arrow IPC bytes it came in (so logging does not
    re-encode); `batch` is the table read from them.

    `digest`: a keyed batch's content digest (store/digest.py), the value its idempotency key is
    remembered with. The server computes it where it decodes the batch (off the event loop for a
    large one) and the log records it, so neither the engine nor a replay computes it again; a
    record without it (an older log) is digested when replayed. `digest_columns`, not logged: the
    schema it was computed under, which the engine compares with the stream's (a stream dropped
    and created again meanwhile) before taking it. `prepared`, not logged: the batch's
    store.prepared.PreparedBatch when the server prepared it where it decoded it (the engine
    takes what of it still holds; without it the engine computes the same)."""

    stream: str
    batch: pa.Table
    writer_id: str
    batch_id: int | None
    now_ms: float
    ipc: bytes | None = field(default=None, repr=False)
    event_time_ms: int | None = None  # the writer's event time has reached this (watermark hint)
    digest: int | None = None
    digest_columns: tuple | None = field(default=None, repr=False)
    prepared: PreparedBatch | None = field(default=None, repr=False, compare=False)

    def payload(self) -> bytes:
        if self.ipc is not None:
            return self.ipc
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, self.batch.schema) as w:
            w.write_table(self.batch)
        return sink.getvalue().to_pybytes()


@dataclass(frozen=True)
class Slide:
    """Slide `stream` at `now_ms`. From a client (manual clock) with an optional idempotency key;
    in the log, every slide the engine applied, whatever its cause."""

    stream: str
    now_ms: float
    writer_id: str = ""
    batch_id: int | None = None


@dataclass(frozen=True, eq=False)
class StageRows:
    """Rows of one task attempt of batch (writer_id, batch_id), held invisible until the batch is
    committed (exactly-once micro-batches: Spark stages per attempt, commits the successful ones)."""

    stream: str
    writer_id: str
    batch_id: int
    attempt: str
    chunk: int             # staging the same chunk again replaces it (a retried request)
    batch: pa.Table
    now_ms: float
    ipc: bytes | None = field(default=None, repr=False)

    payload = Append.payload


@dataclass(frozen=True)
class CommitBatch:
    """Publish batch (writer_id, batch_id): the rows staged by exactly these attempts (each with
    the row count its task reported), as one append; optionally slide (manual clock) right after.
    With `at_slide` s the rows go into sub-window s: held pending until the slide that opens it
    when that is still ahead, refused when it is past (cross-partition atomicity, ingest.py).
    Sent again for a pending batch it re-targets it (None: publish it now); `split` marks the
    committer's fallback when the partitions of the batch could not get one common target."""

    stream: str
    writer_id: str
    batch_id: int
    attempts: tuple[tuple[str, int], ...]
    slide: bool
    now_ms: float
    event_time_ms: int | None = None  # the writers' event time has reached this (watermark hint)
    at_slide: int | None = None
    split: bool = False


@dataclass(frozen=True)
class AbortBatch:
    """Discard everything staged for batch (writer_id, batch_id)."""

    stream: str
    writer_id: str
    batch_id: int
    now_ms: float


@dataclass(frozen=True)
class CompactStrings:
    """Reclaim the string codes no live sub-window of `stream` holds (renumbering the rest)."""

    stream: str
    now_ms: float


@dataclass(frozen=True)
class Register:
    query_id: str
    text: str
    priority: int
    now_ms: float
    owner: str = ""   # the principal it belongs to (only it, or an admin, may unregister it)
    sketches: bool = False  # its answers carry their merged sketches (a partition's: docs/partitions.md)
    key: str = ""     # the client's idempotency key: a Register with the key of a live registration is that one


@dataclass(frozen=True)
class Unregister:
    query_id: str
    now_ms: float


@dataclass(frozen=True)
class Answered:
    """A periodic query's answer, kept in its answer log (answers.py): logged so that a restart
    gives readers the answers they have not read yet. `answer` is answers.to_plain's form."""

    query_id: str
    answer: dict
    now_ms: float


@dataclass(frozen=True)
class AnsweredMany:
    """The answers one shared execution delivered (txn/sharing/runtime.py), in one record instead
    of an Answered per member: `answers` holds each distinct answer once (answers.plain_answer),
    `members` per member [query_id, its index in `answers`, its own fields (answers.plain_meta)].
    A member's answer is {**answers[index], **fields}: what its Answered record would hold.
    Replay adds them in order, as it would the Answered records (log format: kind 12, added after
    v1; a log without it recovers as before).

    A record whose members share every field but their own window, execution
    number and timing (not a join's: those carry their own provenance) is columnar: `common` holds
    the shared fields once (answers.plain_meta's) and `members` one list per field over the
    members (answers.MEMBER_COLUMNS: "query_id", "answer" (the index in `answers`), then the
    member's own fields), so a record holds a few lists, not two objects per member. A record
    without `common` is read as before; a server that predates the `common` field refuses a
    record with it (an unknown field): docs/sharing.md's log-format note."""

    answers: list
    members: "list | dict"
    now_ms: float
    common: dict | None = None

    def query_ids(self) -> list[str]:
        if self.common is not None:
            return list(self.members["query_id"])  # type: ignore[call-overload]  # columnar: a dict
        return [m[0] for m in self.members]

    def answer_indexes(self) -> list[int]:
        """Per member, the index of its answer in `answers`."""
        if self.common is not None:
            return list(self.members["answer"])  # type: ignore[call-overload]  # columnar: a dict
        return [m[1] for m in self.members]


@dataclass(frozen=True)
class SealedSketches:
    """The sketches of `stream`'s slide `slide` that a replay of its rows would not rebuild bit for
    bit (KLL compacts with random bits: store/sketch_columns.py), as they were sealed: sketch_key
    -> base64 of the library's bytes. Logged when the slide is installed; a replay puts them back,
    so a sub-window sealed again after a crash answers as it did before."""

    stream: str
    slide: int
    sketches: dict
    now_ms: float


Command = (CreateStream | DropStream | Append | Slide | Register | Unregister | CompactStrings | StageRows | CommitBatch
           | AbortBatch | Answered | SealedSketches | AnsweredMany)


class Kind(enum.IntEnum):
    """A command's kind byte in the log. The number is what data directories on disk hold: never
    change or reuse one (tests/test_log_format.py pins them); a new command takes the next."""

    CREATE_STREAM = 0
    DROP_STREAM = 1
    APPEND = 2
    SLIDE = 3
    REGISTER = 4
    UNREGISTER = 5
    COMPACT_STRINGS = 6
    STAGE_ROWS = 7
    COMMIT_BATCH = 8
    ABORT_BATCH = 9
    ANSWERED = 10
    SEALED_SKETCHES = 11
    ANSWERED_MANY = 12


CLASS_OF: dict[Kind, type] = {
    Kind.CREATE_STREAM: CreateStream, Kind.DROP_STREAM: DropStream, Kind.APPEND: Append, Kind.SLIDE: Slide,
    Kind.REGISTER: Register, Kind.UNREGISTER: Unregister, Kind.COMPACT_STRINGS: CompactStrings,
    Kind.STAGE_ROWS: StageRows, Kind.COMMIT_BATCH: CommitBatch, Kind.ABORT_BATCH: AbortBatch, Kind.ANSWERED: Answered,
    Kind.SEALED_SKETCHES: SealedSketches, Kind.ANSWERED_MANY: AnsweredMany}
KIND_OF: dict[type, Kind] = {cls: kind for kind, cls in CLASS_OF.items()}
_WITH_ROWS = {Append: ("stream", "writer_id", "batch_id", "now_ms"),
              StageRows: ("stream", "writer_id", "batch_id", "attempt", "chunk", "now_ms")}
_HEAD = struct.Struct("<BBI")


def encode(cmd: Command) -> bytes:
    return b"".join(encode_parts(cmd))


def encode_parts(cmd: Command) -> tuple[bytes, ...]:
    """encode(cmd) as consecutive parts: a batch's Arrow bytes are the last one, as they came
    (the log writes the parts one after the other, without copying a large batch into one)."""
    kind = KIND_OF[type(cmd)]
    if type(cmd) in _WITH_ROWS:
        header = {name: getattr(cmd, name) for name in _WITH_ROWS[type(cmd)]}
        if getattr(cmd, "event_time_ms", None) is not None:  # written only when set: older records stay as they were
            header["event_time_ms"] = cmd.event_time_ms  # type: ignore[union-attr]  # an Append's
        if getattr(cmd, "digest", None) is not None:  # likewise (a keyed Append's)
            header["digest"] = cmd.digest  # type: ignore[union-attr]  # an Append's
        body = cmd.payload()  # type: ignore[union-attr, misc]  # the commands with rows: Append's payload()
    else:
        header, body = asdict(cmd), b""
        if header.get("event_time_ms", 0) is None:  # written only when set: older records stay as they were
            del header["event_time_ms"]
        if type(cmd) is AnsweredMany and header["common"] is None:  # likewise (the rows form: a join's)
            del header["common"]
        if type(cmd) is Register:  # likewise
            if not header["sketches"]:
                del header["sketches"]
            if not header["key"]:
                del header["key"]
        if type(cmd) is CommitBatch:  # likewise
            if header["at_slide"] is None:
                del header["at_slide"]
            if not header["split"]:
                del header["split"]
        if type(cmd) is CreateStream:  # the spec's fields flat, before now_ms
            now_ms = header.pop("now_ms")
            header.update((k, v) for k, v in header.pop("spec").items() if _OMITTED_AT.get(k, _KEEP) != v)
            header["now_ms"] = now_ms
    head = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    head = _HEAD.pack(FORMAT, kind, len(head)) + head
    return (head, body) if body else (head,)


# Spec fields written only when set (a partition's), so an ordinary stream's record is written as
# before they existed, byte for byte; decoding fills in the defaults.
_OMITTED_AT = {"partition_of": "", "partition": 0, "partitions": 0, "partition_by": (), "origin_ms": None,
               "last_rows": 0, "last_rows_by": (), "last_rows_keys": 0, "sketches": ()}
_KEEP = object()


def decode(data: bytes | memoryview) -> Command:
    version, kind, n = _HEAD.unpack_from(data, 0)
    cls = CLASS_OF.get(kind)
    if version != FORMAT or cls is None:
        raise ValueError(f"unknown command format {version}/{kind}")
    header = json.loads(bytes(data[_HEAD.size:_HEAD.size + n]))
    if cls in _WITH_ROWS:
        ipc = bytes(data[_HEAD.size + n:])
        with pa.ipc.open_stream(pa.BufferReader(ipc)) as reader:
            table = reader.read_all()
        return cls(batch=table, ipc=ipc, **header)
    if cls is CreateStream:
        spec = {f.name: header.pop(f.name) for f in fields(WindowSpec) if f.name in header}
        if "group_by" in spec:
            spec["group_by"] = tuple(spec["group_by"])
        header["spec"] = WindowSpec(**spec)
    for f in fields(cls):
        if isinstance(header.get(f.name), list):  # JSON has no tuples
            header[f.name] = tuple(tuple(x) if isinstance(x, list) else x for x in header[f.name])
    return cls(**header)
