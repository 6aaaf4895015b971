"""`windowstore cluster ...`: a cluster coordinated through etcd (docs/cluster.md).

- `cluster status`: the nodes (address, live or not) and every placed partition's replicas,
  leader, epoch and in-sync set, as etcd holds them (a table, or JSON with --json);
- `cluster place STREAM --partitions P --replication R`: write a stream's partition map (each
  partition on R consecutive registered nodes, the first preferred as leader), once.
"""
from __future__ import annotations

import json
import sys


def _view(args):
    from .coordination.etcd import Etcd
    from .coordination.view import EtcdClusterView

    return EtcdClusterView(Etcd(args.etcd), args.etcd_prefix, watch=False)


def status(view) -> dict:
    """The cluster as a JSON-able dict: nodes and partitions."""
    addresses, live = view.addresses, view.live()
    parts = []
    for st in view.partitions():
        parts.append({"stream": st.stream, "partition": st.partition, "name": st.name,
                      "replicas": list(st.replicas), "epoch": st.epoch,
                      "leader": st.leader.node if st.leader is not None else None,
                      "leader_address": addresses[st.leader.node] if st.leader is not None and st.leader.node < len(addresses) else None,
                      "in_sync": list(st.in_sync) if st.in_sync is not None else None})
    return {"revision": view.revision,
            "nodes": [{"node": i, "address": a, "live": i in live} for i, a in enumerate(addresses) if a],
            "partitions": parts}


def _status(args) -> int:
    from .coordination.etcd import EtcdError

    try:
        with _view(args) as view:
            out = status(view)
    except (EtcdError, ValueError) as e:
        print(f"cluster status: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"nodes (etcd revision {out['revision']}):")
    for n in out["nodes"]:
        print(f"  {n['node']:>3}  {n['address']:<24} {'live' if n['live'] else 'down'}")
    if not out["partitions"]:
        print("no partitions placed")
        return 0
    rows = [("partition", "leader", "epoch", "in-sync", "replicas")]
    for p in out["partitions"]:
        leader = f"{p['leader']} ({p['leader_address']})" if p["leader"] is not None else "none"
        isr = ",".join(map(str, p["in_sync"])) if p["in_sync"] is not None else "-"
        rows.append((p["name"], leader, str(p["epoch"]), isr, ",".join(map(str, p["replicas"]))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return 0


def _place(args) -> int:
    import numpy as np

    from windowstore.store.partitions import MAX_PARTITIONS, splitmix64, string_word

    from .coordination.election import place, placement
    from .coordination.etcd import EtcdError

    if not 1 <= args.partitions <= MAX_PARTITIONS:
        print(f"cluster place: --partitions {args.partitions}: 1 to {MAX_PARTITIONS}", file=sys.stderr)
        return 2
    try:
        with _view(args) as view:
            nodes = [i for i, a in enumerate(view.addresses) if a]
            if not 1 <= args.replication <= len(nodes):
                print(f"cluster place: --replication {args.replication}: 1 to the {len(nodes)} registered node(s)",
                      file=sys.stderr)
                return 2
            start = int(splitmix64(np.array([string_word(args.stream)], dtype=np.uint64))[0] % np.uint64(len(nodes)))
            replicas = placement(start, nodes, args.partitions, args.replication)
            if not place(view.etcd, view.keys, args.stream, replicas):
                print(f"cluster place: stream {args.stream!r} is already placed", file=sys.stderr)
                return 1
    except (EtcdError, ValueError) as e:
        print(f"cluster place: {e}", file=sys.stderr)
        return 2
    print(json.dumps({"stream": args.stream, "replicas": replicas}))
    return 0


def add_commands(sub) -> None:
    cl = sub.add_parser("cluster", help="a cluster coordinated through etcd: status, placing streams")
    csub = cl.add_subparsers(dest="cluster_command", required=True)
    for name, fn, doc in (("status", _status, "nodes, and each partition's leader, epoch, in-sync set and replicas"),
                          ("place", _place, "write a stream's partition map (which nodes replicate each partition)")):
        p = csub.add_parser(name, help=doc)
        p.add_argument("--etcd", required=True, metavar="URL", help="an etcd endpoint, http://HOST:PORT")
        p.add_argument("--etcd-prefix", default="/windowstore/", help="the cluster's keys in etcd (default /windowstore/)")
        p.set_defaults(func=fn)
        if name == "status":
            p.add_argument("--json", action="store_true", help="print JSON instead of a table")
        else:
            p.add_argument("stream", help="the stream (its partitions are STREAM.p0, STREAM.p1, ...)")
            p.add_argument("--partitions", type=int, required=True, help="how many partitions")
            p.add_argument("--replication", type=int, default=1, help="replicas per partition (default 1)")
