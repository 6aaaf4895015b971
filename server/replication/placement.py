"""Where a replicated stream's replicas live, from the cluster file (store/partitions.py reads its
`nodes`): an optional table names a stream's (or a partition's) replica nodes, leader first,

    [replicas]
    "flows.p0" = [1, 2]

and a stream it does not name has R replicas on consecutive nodes from the map's owner: owner(S, i),
owner + 1, ... (mod N). Pure: every server computes the same placement."""
from __future__ import annotations

import tomllib

from windowstore.store.errors import InvalidInput
from windowstore.store.partitions import StaticCluster


def replicas(cluster_file: str, name: str, spec, replication: int) -> list[int]:
    """The replica nodes of stream `name` (a partition's spec names its partitioned stream), leader first."""
    cluster = StaticCluster.load(cluster_file)
    n = len(cluster.nodes)
    if replication > n:
        raise InvalidInput(f"replication {replication} needs as many servers; the cluster has {n}")
    with open(cluster_file, "rb") as f:
        table = tomllib.load(f).get("replicas", {})
    if not isinstance(table, dict):
        raise InvalidInput(f"cluster file {cluster_file!r}: `replicas` must be a table of stream = [nodes]")
    listed = table.get(name)
    if listed is not None:
        if (not isinstance(listed, list) or len(set(listed)) != len(listed)
                or not all(isinstance(i, int) and 0 <= i < n for i in listed)):
            raise InvalidInput(f"cluster file {cluster_file!r}: replicas of {name!r} must be distinct nodes 0 to {n - 1}")
        if len(listed) != replication:
            raise InvalidInput(f"replication {replication}: the cluster file lists {len(listed)} replicas of {name!r}")
        return list(listed)
    partitioned = getattr(spec, "partitions", 0) and 0 <= spec.partition < spec.partitions
    owner = cluster.owner(spec.partition_of, spec.partition) if partitioned else cluster.owner(name, 0)
    return [(owner + i) % n for i in range(replication)]
