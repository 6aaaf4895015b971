"""Where the cluster's coordination state lives in etcd, and how its values are written.

Every key is under one prefix (default `/windowstore/`), so several clusters can share an etcd:

- `nodes/{i}`           node i's address ("host:port"); written by the server at start, kept;
- `live/{i}`            node i's address, attached to its lease: present while the node is up;
- `map/{stream}`        the partition map of a stream: its partition count and each partition's
                        replicas (node ids, the preferred leader first); written once when placed;
- `leader/{stream}/{p}` the leader of partition p: its node and epoch, attached to its lease, so
                        it disappears when the leader stops renewing it;
- `epoch/{stream}/{p}`  the partition's newest epoch and the node that leads (or led) it: kept
                        when the leader's key expires, bumped by each election;
- `isr/{stream}/{p}`    the in-sync replica set: the nodes eligible to become leader; written by
                        the leader (and by the election that makes one).

Values are JSON with sorted keys and no spaces, so a value written once compares equal byte for
byte in a later transaction (the in-sync write is guarded by the leader key's exact value).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

DEFAULT_PREFIX = "/windowstore/"


def encode(value: dict[str, Any]) -> str:
    """A value as it is stored: canonical JSON."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def decode(text: str) -> dict[str, Any] | None:
    """A stored value, or None if it is not a JSON object (written by something else)."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def normalize_prefix(prefix: str) -> str:
    """`/windowstore` and `/windowstore/` name the same prefix."""
    if not prefix:
        raise ValueError("the etcd key prefix must not be empty")
    return prefix if prefix.endswith("/") else prefix + "/"


@dataclass(frozen=True)
class Keys:
    """The keys of one cluster (under `prefix`)."""

    prefix: str = DEFAULT_PREFIX

    def node(self, node: int) -> str:
        return f"{self.prefix}nodes/{node}"

    def live(self, node: int) -> str:
        return f"{self.prefix}live/{node}"

    def map(self, stream: str) -> str:
        return f"{self.prefix}map/{stream}"

    def leader(self, stream: str, partition: int) -> str:
        return f"{self.prefix}leader/{stream}/{partition}"

    def epoch(self, stream: str, partition: int) -> str:
        return f"{self.prefix}epoch/{stream}/{partition}"

    def isr(self, stream: str, partition: int) -> str:
        return f"{self.prefix}isr/{stream}/{partition}"

    def parse(self, key: str) -> tuple[str, tuple] | None:
        """(kind, args) of a key of this cluster: ("node", (i,)), ("map", (stream,)),
        ("leader", (stream, p)), ...; None for any other key."""
        if not key.startswith(self.prefix):
            return None
        kind, _, rest = key[len(self.prefix):].partition("/")
        try:
            if kind in ("nodes", "live"):
                return ("node" if kind == "nodes" else "live"), (int(rest),)
            if kind == "map" and rest:
                return "map", (rest,)
            if kind in ("leader", "epoch", "isr"):
                stream, _, p = rest.rpartition("/")
                if stream:
                    return kind, (stream, int(p))
        except ValueError:
            return None
        return None
