"""The concurrency-control half of windowstore's pure core: slides as write transactions,
queries as read-only transactions, the SERIAL / WS / LWS / TTU / TTU-rescan schedulers,
histories and the isolation checker (thesis chapter 7), periodic EDF scheduling (8.4)."""
from .checker import Report, Verdict, check, classify
from .history import History, Op, read_jsonl
from .kinds import AbortCause, JobKind, PolicyName, QueryKind, SlideCause, Step
from .scheduler import (ONETIME, PERIODIC, POLICIES, QueryFailed, QueryTxn, QueryWithdrawn,
                        RestartLimitExceeded, Result, Scheduler, StreamFailed, Task)

__all__ = ["AbortCause", "History", "JobKind", "ONETIME", "Op", "PERIODIC", "POLICIES", "PolicyName", "QueryFailed",
           "QueryKind", "QueryTxn", "QueryWithdrawn", "Report", "RestartLimitExceeded", "Result", "Scheduler",
           "SlideCause", "Step", "StreamFailed", "Task", "Verdict", "check", "classify", "read_jsonl"]
