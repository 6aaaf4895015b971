"""The concurrency-control half of windowstore's pure core: slides as write transactions,
queries as read-only transactions, the SERIAL / WS / LWS / TTU / TTU-rescan schedulers,
histories and the isolation checker (thesis chapter 7), periodic EDF scheduling (8.4)."""
from .checker import Report, Verdict, check, classify
from .history import History, read_jsonl
from .scheduler import (ONETIME, PERIODIC, POLICIES, QueryFailed, QueryTxn, QueryWithdrawn,
                        RestartLimitExceeded, Result, Scheduler, StreamFailed, Task)

__all__ = ["History", "ONETIME", "PERIODIC", "POLICIES", "QueryFailed", "QueryTxn", "QueryWithdrawn", "Report",
           "RestartLimitExceeded", "Result", "Scheduler", "StreamFailed", "Task", "Verdict", "check", "classify",
           "read_jsonl"]
