"""The data source's options, checked strictly (an unknown one is an error listing the valid ones),
and the store connection they name (target, TLS, token). Shared by the writers and the readers;
nothing here calls Spark or the store."""
from __future__ import annotations

from typing import Mapping

from ..client import Client


def connect(target: str | dict) -> Client:
    """A client for `target`: an address, or a dict of Client arguments (TLS, token)."""
    return Client(**target) if isinstance(target, dict) else Client(target)


def _connection(opts: dict) -> dict:
    """Client arguments from the options target, tls, tls_ca, tls_cert, tls_key, token, etcd (a
    cluster in etcd: every call follows its replicated stream's leader, docs/failover.md)."""
    return {"target": opts.get("target", "127.0.0.1:50051"), "tls": opts.get("tls", False), "ca": opts.get("tls_ca"),
            "cert": opts.get("tls_cert"), "key": opts.get("tls_key"), "token": opts.get("token"),
            "etcd": opts.get("etcd")}


def _bool(name: str, value: str) -> bool:
    v = str(value).strip().lower()
    if v not in ("true", "false"):
        raise ValueError(f"windowstore option {name!r} must be true or false, got {value!r}")
    return v == "true"


def _positive_int(name: str, value: str) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise ValueError(f"windowstore option {name!r} must be a whole number, got {value!r}") from None
    if n <= 0:
        raise ValueError(f"windowstore option {name!r} must be positive, got {n}")
    return n


def _non_negative_int(name: str, value: str) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise ValueError(f"windowstore option {name!r} must be a whole number, got {value!r}") from None
    if n < 0:
        raise ValueError(f"windowstore option {name!r} must be 0 or more, got {n}")
    return n


_CONNECT_OPTIONS = {"target": str, "tls": _bool, "tls_ca": str, "tls_cert": str, "tls_key": str, "token": str,
                    "etcd": str}
_WRITE_OPTIONS = {**_CONNECT_OPTIONS, "stream": str, "writer_id": str, "slide_per_batch": _bool,
                  "max_rows_per_append": _positive_int, "batch_id": lambda n, v: int(v),
                  # create_if_missing: the stream is created when the write starts, with these
                  "create_if_missing": _bool, "subwindows": _positive_int, "subwindow_ms": _positive_int,
                  "subwindow_rows": _positive_int, "clock": str, "group_by": str, "time_column": str,
                  "allowed_lateness_ms": _non_negative_int,
                  # ... and on a cluster target, a partitioned stream
                  "partitions": _positive_int, "partition_by": str, "origin_ms": _non_negative_int}
_READ_OPTIONS = {**_CONNECT_OPTIONS, "query": str, "query_id": str, "event_time_as_timestamp": _bool,
                 "as_of_slide": lambda n, v: _non_negative_int(n, v), "filter_pushdown": _bool,
                 "partitions": _positive_int}
_SPARK_OPTIONS = {"path", "checkpointlocation"}  # Spark's own, passed along


def parse_options(options: Mapping[str, str], allowed: dict) -> dict:
    """Options checked strictly: an unknown one is an error listing the valid ones."""
    out = {}
    by_lower = {k.lower(): k for k in allowed}
    for key, value in dict(options).items():
        name = by_lower.get(key.lower())
        if name is None:
            if key.lower() in _SPARK_OPTIONS:
                continue
            raise ValueError(f"unknown windowstore option {key!r}; valid options: {', '.join(sorted(allowed))}")
        parse = allowed[name]
        out[name] = parse(value) if parse is str else parse(name, value)
    return out
