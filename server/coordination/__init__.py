"""Coordination of a cluster through etcd (docs/cluster.md): the partition map, leader leases,
epochs and in-sync replica sets live in etcd, and each server's coordinator drives its roles.

One job per module: keys.py (the key layout), etcd.py (the etcd calls), view.py (the cluster as
etcd holds it, a ClusterView), lease.py (a node's lease, kept alive), election.py (the
transactions that place streams and elect leaders), roles.py (what the coordinator drives),
coordinator.py (a node's decisions), metrics.py (their Prometheus metrics), local.py (a
throwaway etcd for tests and trials).
"""
