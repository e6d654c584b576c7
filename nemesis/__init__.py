"""ktrial.nemesis — faults, recorded in the history, always healed.

API for `trial.py`::

    nem = Nemesis(cluster, recorder, ["partition", "kill"], random.Random(seed),
                  partitions=[("topic", 0), ...], proxies=client_proxies_or_None)
    stack.callback(nem.heal_all)                # Ctrl-C and errors heal too
    sched = stack.enter_context(ScheduleThread(make_schedule("interval", nem.faults, 10), nem))
    ...
    sched.close()                               # stops the schedule; it heals on the way out

A `Fault` is one activation of a family: ``start(targets) -> dict``, ``stop()``. See
docs/faults.md for what each fault does at the system level.
"""

from .base import Context, Fault, FaultBase, TargetSpec
from .clean import clean_leftovers
from .core import FAMILIES, FAULT_NAMES, Nemesis, fault_params
from .memory import MemoryFault
from .network import LossFault, PartitionFault
from .options import NemesisOptionError, NemesisOptions, parse_faults, parse_params
from .process import KillFault, PauseFault, RollingRestart
from .proxies import ClientProxies, ProxyPlan, plan_proxies
from .schedule import (
    IntervalSchedule,
    Schedule,
    ScheduleThread,
    ScriptEntry,
    ScriptSchedule,
    StablePeriodSchedule,
    load_script,
    make_schedule,
)
from .toxics import ToxicFault
from .toxiproxy import ToxiproxyClient, ToxiproxyError, ToxiproxyServer

__all__ = [
    "FAMILIES",
    "FAULT_NAMES",
    "ClientProxies",
    "Context",
    "Fault",
    "FaultBase",
    "IntervalSchedule",
    "KillFault",
    "LossFault",
    "MemoryFault",
    "Nemesis",
    "NemesisOptionError",
    "NemesisOptions",
    "PartitionFault",
    "PauseFault",
    "ProxyPlan",
    "RollingRestart",
    "Schedule",
    "ScheduleThread",
    "ScriptEntry",
    "ScriptSchedule",
    "StablePeriodSchedule",
    "TargetSpec",
    "ToxicFault",
    "ToxiproxyClient",
    "ToxiproxyError",
    "ToxiproxyServer",
    "clean_leftovers",
    "fault_params",
    "load_script",
    "make_schedule",
    "parse_faults",
    "parse_params",
    "plan_proxies",
]
