"""The scheduler's machinery apart from concurrency control, which the core (txn/scheduler.py)
drives: the EDF queue of periodic queries (edf), the cost model (costs), slides and their seals
(seals), offloaded query work (offload), how a query's attempt ends (outcomes), and the counters
(counters). None of it picks a policy."""
