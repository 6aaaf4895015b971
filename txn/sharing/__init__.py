"""Shared execution of periodic queries (thesis 8.3-8.4): which registered queries can share state
and computation (rules.py), the groups G_i and sub-groups G_ij they form (groups.py), the relative
cost of executing sub-groups together (cost.py), and the local schedulers that decide which
sub-groups run together when (schedulers.py). Pure: no threads, sockets or clocks; the server's
scheduler drives it with update notifications and executions."""
from .cost import CostModel, Phasing, choose_periods, drifting_cost, schedule_cost
from .groups import Groups, Output
from .modes import SharingMode
from .rules import Member, Synopsis, describe
from .schedulers import Execution, LocalScheduler, make_scheduler

__all__ = ["CostModel", "Execution", "Groups", "LocalScheduler", "Member", "Output", "Phasing", "SharingMode", "Synopsis",
           "choose_periods", "describe", "drifting_cost", "make_scheduler", "schedule_cost"]
