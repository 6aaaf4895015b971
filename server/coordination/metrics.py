"""Prometheus metrics of a node's coordination, read at scrape time: campaigns, elections won,
step-downs and lost leases (counters), and per partition the role and epoch this node holds."""
from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from .roles import Role


class CoordinationCollector:
    def __init__(self, coordinator):
        self.coordinator = coordinator

    def collect(self):
        c = self.coordinator.counters
        for name, doc, value in (
                ("windowstore_campaigns", "campaigns this node made for a partition with no leader", c.campaigns),
                ("windowstore_elections_won", "elections this node won (it became a partition's leader at a new epoch)",
                 c.elections_won),
                ("windowstore_leader_step_downs", "partitions this node led and then followed a newer leader",
                 c.step_downs),
                ("windowstore_leases_lost", "leases that expired before this node renewed them", c.leases_lost),
                ("windowstore_coordination_errors", "coordination passes that failed (etcd unreachable)", c.errors)):
            family = CounterMetricFamily(name, doc)
            family.add_metric([], value)
            yield family
        role = GaugeMetricFamily("windowstore_partition_leader",
                                 "1 where this node leads the partition, 0 where it follows", labels=["partition"])
        epoch = GaugeMetricFamily("windowstore_partition_epoch", "the epoch of this node's role in the partition",
                                  labels=["partition"])
        for name, a in sorted(self.coordinator.table.snapshot().items()):
            role.add_metric([name], 1 if a.role is Role.LEADER else 0)
            epoch.add_metric([name], a.epoch)
        yield role
        yield epoch
