"""The etcd v3 calls the coordinator makes: ranges, transactions, leases and watches.

They go through etcd's JSON gateway (`/v3/...`) with etcd3gw (maintained, and free of protobuf
pins: the older gRPC clients ship code generated for protobuf 3 that today's protobuf refuses to
load). etcd3gw supplies the HTTP session, the API path and its error mapping; the request bodies
are etcd's own messages (api/etcdserverpb/rpc.proto) in their JSON form, so every call here is one
etcd RPC, and transactions compare and write several keys atomically. Keys and values are base64
on the wire; int64 fields arrive as strings and fields at their default value are left out.
"""
from __future__ import annotations

import base64
import json
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable
from urllib.parse import urlsplit

import requests
from etcd3gw.client import Etcd3Client
from etcd3gw.exceptions import Etcd3Exception


class EtcdError(Exception):
    """etcd could not be reached or refused a call; the message names the endpoint."""


def b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def unb64(text: str | None) -> str:
    return base64.b64decode(text or "").decode("utf-8")


def prefix_end(prefix: str) -> str:
    """The first key after every key starting with `prefix` (etcd's range_end for a prefix)."""
    raw = bytearray(prefix.encode("utf-8"))
    raw[-1] += 1  # prefixes here end in "/": never 0xff
    return raw.decode("utf-8")


@dataclass(frozen=True)
class KeyValue:
    key: str
    value: str
    create_revision: int
    mod_revision: int
    lease: int

    @classmethod
    def from_json(cls, kv: dict[str, Any]) -> "KeyValue":
        return cls(unb64(kv.get("key")), unb64(kv.get("value")), int(kv.get("create_revision", 0)),
                   int(kv.get("mod_revision", 0)), int(kv.get("lease", 0)))


@dataclass(frozen=True)
class Event:
    kind: str  # "put" or "delete"
    kv: KeyValue


# -- transaction parts (etcdserverpb.Compare and RequestOp) ----------------------------------------
def created_never(key: str) -> dict[str, Any]:
    """Compare: `key` does not exist (its create_revision is 0)."""
    return {"key": b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}


def modified_at(key: str, revision: int) -> dict[str, Any]:
    """Compare: `key` was last written at `revision` (0: it does not exist)."""
    return {"key": b64(key), "target": "MOD", "result": "EQUAL", "mod_revision": str(revision)}


def value_is(key: str, value: str) -> dict[str, Any]:
    """Compare: `key` holds exactly `value`."""
    return {"key": b64(key), "target": "VALUE", "result": "EQUAL", "value": b64(value)}


def put(key: str, value: str, lease: int = 0) -> dict[str, Any]:
    body: dict[str, Any] = {"key": b64(key), "value": b64(value)}
    if lease:
        body["lease"] = str(lease)
    return {"request_put": body}


def delete(key: str) -> dict[str, Any]:
    return {"request_delete_range": {"key": b64(key)}}


class Etcd:
    """A connection to one etcd endpoint (`http://host:port`). Safe to share between threads:
    each call is one HTTP request, and each watch has a session of its own."""

    def __init__(self, url: str, timeout: float = 5.0):
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme != "http" or not parts.hostname or parts.port is None:
            raise ValueError(f"etcd endpoint {url!r}: expected http://HOST:PORT")
        self.url = f"http://{parts.hostname}:{parts.port}"
        self.host, self.port, self.timeout = parts.hostname, parts.port, timeout
        self.client = Etcd3Client(host=parts.hostname, port=parts.port, timeout=timeout, api_path="/v3/")
        self._lock = threading.Lock()  # one request at a time on the shared session

    def close(self) -> None:
        self.client.session.close()

    def call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """One etcd RPC through the gateway: its JSON response."""
        try:
            with self._lock:
                return self.client.post(self.client.get_url(path), json=body)
        except Etcd3Exception as e:
            detail = " ".join(str(a) for a in e.args if a) or type(e).__name__
            raise EtcdError(f"etcd {self.url}: {path}: {detail}") from None
        except (requests.RequestException, ValueError) as e:
            raise EtcdError(f"etcd {self.url}: {path}: {e}") from None

    # -- keys -------------------------------------------------------------------------------------
    def range_prefix(self, prefix: str) -> tuple[int, list[KeyValue]]:
        """Every key under `prefix` and the store's revision they were read at."""
        out = self.call("/kv/range", {"key": b64(prefix), "range_end": b64(prefix_end(prefix))})
        return int(out["header"]["revision"]), [KeyValue.from_json(kv) for kv in out.get("kvs", [])]

    def get(self, key: str) -> KeyValue | None:
        out = self.call("/kv/range", {"key": b64(key)})
        kvs = out.get("kvs", [])
        return KeyValue.from_json(kvs[0]) if kvs else None

    def put(self, key: str, value: str, lease: int = 0) -> int:
        """Write `key`; the revision it was written at."""
        return int(self.call("/kv/put", put(key, value, lease)["request_put"])["header"]["revision"])

    def txn(self, compare: Iterable[dict], success: Iterable[dict], failure: Iterable[dict] = ()) -> tuple[bool, int]:
        """An etcd transaction: (whether every comparison held, so `success` ran; the revision)."""
        out = self.call("/kv/txn", {"compare": list(compare), "success": list(success), "failure": list(failure)})
        return bool(out.get("succeeded", False)), int(out["header"]["revision"])

    # -- leases -----------------------------------------------------------------------------------
    def grant(self, ttl_s: int) -> tuple[int, int]:
        """A new lease: (its id, the TTL etcd granted, in seconds)."""
        out = self.call("/lease/grant", {"TTL": str(ttl_s)})
        if out.get("error"):
            raise EtcdError(f"etcd {self.url}: lease grant: {out['error']}")
        return int(out["ID"]), int(out["TTL"])

    def keepalive(self, lease: int) -> int:
        """Renew `lease`: its TTL from now, in seconds; 0 or less once it has expired."""
        out = self.call("/lease/keepalive", {"ID": str(lease)})
        return int(out.get("result", {}).get("TTL", 0))

    def revoke(self, lease: int) -> None:
        """End `lease` now, deleting its keys (an expired lease is not an error)."""
        try:
            self.call("/lease/revoke", {"ID": str(lease)})
        except EtcdError as e:
            if "not found" not in str(e):
                raise

    # -- watches ----------------------------------------------------------------------------------
    def watch_prefix(self, prefix: str, start_revision: int, on_events: Callable[[int, list[Event]], None],
                     stop: threading.Event, poll_s: float = 1.0) -> int:
        """Deliver every change under `prefix` from `start_revision` on, in order, as
        on_events(revision, events), until `stop` is set; then return the next revision to watch
        from. Each HTTP watch lasts at most `poll_s` without news (then it is opened again from
        where it was, so `stop` is seen). Raises EtcdError when etcd cannot be reached, and
        CompactedError when `start_revision` has been compacted away (read the keys again)."""
        session = requests.Session()
        url = self.client.get_url("/watch")
        body = {"create_request": {"key": b64(prefix), "range_end": b64(prefix_end(prefix)),
                                   "start_revision": str(start_revision)}}
        progress = [start_revision]  # the next revision to watch from, kept across reopened watches
        try:
            while not stop.is_set():
                body["create_request"]["start_revision"] = str(progress[0])
                try:
                    with session.post(url, json=body, stream=True, timeout=(self.timeout, poll_s)) as resp:
                        if resp.status_code != 200:
                            raise EtcdError(f"etcd {self.url}: watch: HTTP {resp.status_code} {resp.text[:200]}")
                        self._read_watch(resp, progress, on_events, stop)
                except (requests.exceptions.ReadTimeout, requests.exceptions.ChunkedEncodingError,
                        requests.exceptions.ConnectionError) as e:
                    if isinstance(e, requests.exceptions.ConnectTimeout) or not _is_read_timeout(e):
                        raise EtcdError(f"etcd {self.url}: watch: {e}") from None
            return progress[0]
        finally:
            session.close()

    @staticmethod
    def _read_watch(resp, progress: list[int], on_events, stop: threading.Event) -> None:
        buffer = b""
        for chunk in resp.iter_content(chunk_size=None):
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if not line.strip():
                    continue
                msg = json.loads(line)
                if "error" in msg:
                    raise EtcdError(f"watch: {msg['error']}")
                result = msg.get("result", {})
                if int(result.get("compact_revision", 0)) > 0:
                    raise CompactedError(int(result["compact_revision"]))
                events = [Event("delete" if e.get("type") == "DELETE" else "put", KeyValue.from_json(e["kv"]))
                          for e in result.get("events", [])]
                if events:
                    revision = max(e.kv.mod_revision for e in events)
                    on_events(revision, events)
                    progress[0] = revision + 1
            if stop.is_set():
                break


class CompactedError(EtcdError):
    """A watch started at a revision etcd has compacted away: read the keys again."""

    def __init__(self, revision: int):
        super().__init__(f"etcd compacted up to revision {revision}")
        self.revision = revision


def _is_read_timeout(e: Exception) -> bool:
    """A watch that saw nothing for poll_s: requests reports it as a ReadTimeout, or, mid-stream,
    as a ConnectionError wrapping urllib3's ReadTimeoutError."""
    if isinstance(e, requests.exceptions.ReadTimeout):
        return True
    return "Read timed out" in str(e)
