"""Control-API faults: what a system under test lets ktrial do to it through its own API.

Some systems have a control API in place of nodes to break: franz-go's kfake (one
process for every broker, ``--cluster kfake``) can answer requests with an error,
after applying them or instead of it, move partition leaders and move coordinators.
A cluster offers such an API by a ``control_api()`` method (clusters/kfake.py); the
family is refused on every other cluster before the run starts.

Actions (``control.action``):

- ``error``        — answer the ``control.api`` requests reaching the targets with
  Kafka error ``control.error``, for ``control.count`` requests (-1: until the fault
  ends). kfake still applies a produce answered REQUEST_TIMED_OUT or
  NOT_ENOUGH_REPLICAS_AFTER_APPEND, and a (txn) offset commit answered
  REQUEST_TIMED_OUT (the start op says ``applied: true``): the client sees a failure
  for a write that happened, the ambiguous answer a checker must not mistake for a
  lost or duplicated write. The end op says how many requests were answered (``hits``).
- ``leaders``      — move every partition's leader to a random broker (instant; the
  end op undoes nothing: leadership stays where it moved).
- ``coordinators`` — move every group and transaction coordinator (instant, likewise).

A fault that names no action, api or error draws one of :data:`DRAWS` matching what it
names (the schedule draws it when it plans the fault, from the run's seed).
"""

from __future__ import annotations

import contextlib
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..clusters.base import Cluster, Unsupported
from . import params
from .base import Context, FaultBase, TargetSpec

ACTIONS = ("error", "leaders", "coordinators")
# The requests ktrial's clients send, by the names the control API takes.
APIS = (
    "produce",
    "fetch",
    "list_offsets",
    "metadata",
    "offset_commit",
    "offset_fetch",
    "find_coordinator",
    "join_group",
    "heartbeat",
    "leave_group",
    "sync_group",
    "init_producer_id",
    "add_partitions_to_txn",
    "add_offsets_to_txn",
    "end_txn",
    "txn_offset_commit",
)
# Kafka error names a fault may answer with (the protocol's own spelling).
ERRORS = (
    "UNKNOWN_SERVER_ERROR",
    "OFFSET_OUT_OF_RANGE",
    "CORRUPT_MESSAGE",
    "UNKNOWN_TOPIC_OR_PARTITION",
    "LEADER_NOT_AVAILABLE",
    "NOT_LEADER_FOR_PARTITION",
    "NOT_LEADER_OR_FOLLOWER",
    "REQUEST_TIMED_OUT",
    "NETWORK_EXCEPTION",
    "COORDINATOR_LOAD_IN_PROGRESS",
    "COORDINATOR_NOT_AVAILABLE",
    "NOT_COORDINATOR",
    "NOT_ENOUGH_REPLICAS",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    "REBALANCE_IN_PROGRESS",
    "UNKNOWN_MEMBER_ID",
    "ILLEGAL_GENERATION",
    "OUT_OF_ORDER_SEQUENCE_NUMBER",
    "DUPLICATE_SEQUENCE_NUMBER",
    "INVALID_PRODUCER_EPOCH",
    "INVALID_TXN_STATE",
    "INVALID_PRODUCER_ID_MAPPING",
    "CONCURRENT_TRANSACTIONS",
    "TRANSACTION_COORDINATOR_FENCED",
    "PRODUCER_FENCED",
    "KAFKA_STORAGE_ERROR",
    "FENCED_LEADER_EPOCH",
    "UNKNOWN_LEADER_EPOCH",
    "UNSTABLE_OFFSET_COMMIT",
    "THROTTLING_QUOTA_EXCEEDED",
    "UNKNOWN_PRODUCER_ID",
    "TRANSACTION_ABORTABLE",
)
# What an unspecified fault draws from: (action, api, error).
DRAWS: tuple[tuple[str, str | None, str | None], ...] = (
    ("error", "produce", "REQUEST_TIMED_OUT"),  # written, answered as a timeout
    ("error", "produce", "NOT_ENOUGH_REPLICAS_AFTER_APPEND"),  # written, answered an error
    ("error", "produce", "NOT_LEADER_OR_FOLLOWER"),
    ("error", "fetch", "NOT_LEADER_OR_FOLLOWER"),
    ("error", "end_txn", "NOT_COORDINATOR"),
    ("error", "add_partitions_to_txn", "CONCURRENT_TRANSACTIONS"),
    ("error", "txn_offset_commit", "REQUEST_TIMED_OUT"),  # written, answered as a timeout
    ("error", "find_coordinator", "COORDINATOR_NOT_AVAILABLE"),
    ("leaders", None, None),
    ("coordinators", None, None),
)
NO_CONTROL = (
    "this system has no control API (only franz-go's kfake has one here: --cluster kfake "
    "or --system kfake)"
)
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


class ControlAPI(Protocol):
    """What the family needs of a system's control API (clusters.kfake.KfakeControl)."""

    def inject(
        self,
        fault_id: str,
        api: str,
        error: str,
        count: int = -1,
        nodes: Sequence[int] | None = None,
        topic: str | None = None,
    ) -> Mapping[str, str]: ...

    def clear(self, fault_id: str) -> Mapping[str, str]: ...

    def clear_prefix(self, prefix: str) -> Mapping[str, str]: ...

    def shuffle_leaders(self) -> Mapping[str, str]: ...

    def rehash_coordinators(self) -> Mapping[str, str]: ...


def has_control(cluster: Any) -> bool:
    """Whether `cluster` offers a control API (it may answer None until it started): a
    cluster whose system has none says so (`offers_control`, clusters/nodebase.py)."""
    if not getattr(cluster, "offers_control", True):
        return False
    return callable(getattr(cluster, "control_api", None))


def channel(cluster: Cluster) -> ControlAPI:
    """The cluster's control API, or Unsupported saying why there is none."""
    get = getattr(cluster, "control_api", None)
    api = get() if callable(get) else None
    if api is None:
        none = get is None or not has_control(cluster)
        raise Unsupported(NO_CONTROL if none else "the control API is not up yet")
    return api  # type: ignore[no-any-return]


def matching_draws(p: Mapping[str, Any]) -> list[tuple[str, str | None, str | None]]:
    """The entries of DRAWS agreeing with the action, api and error `p` fixes."""
    action, api, error = p.get("action"), p.get("api"), p.get("error")
    if api is not None or error is not None:
        action = action or "error"
    return [
        d
        for d in DRAWS
        if (action is None or d[0] == action)
        and (api is None or d[1] == api)
        and (error is None or d[2] == error)
    ]


def draw(p: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """The action, api and error a fault with parameters `p` runs with: those `p` fixes,
    the rest drawn from DRAWS (an api and an error both fixed need no draw)."""
    action, api, error = p.get("action"), p.get("api"), p.get("error")
    if api is not None and error is not None:
        return {"action": "error", "api": api, "error": error}
    choices = matching_draws(p)
    if not choices:  # validate() refuses this before a run; a direct call gets the reason
        raise params.ParamError(_no_draw(p))
    a, dapi, derr = rng.choice(choices)
    out: dict[str, Any] = {"action": action or a}
    if out["action"] == "error":
        out["api"], out["error"] = api or dapi, error or derr
    return out


def _no_draw(p: Mapping[str, Any]) -> str:
    named = ", ".join(f"control.{k}={p[k]}" for k in ("action", "api", "error") if p.get(k))
    return (
        f"{named}: name both control.api and control.error (nothing to draw the other from; "
        f"the drawn pairs are {', '.join(f'{a}/{e}' for _, a, e in DRAWS if a)})"
    )


class ControlFault(FaultBase):
    """One control-API fault (see the module docstring); targets default to all nodes."""

    name = "control"

    def __init__(
        self,
        ctx: Context,
        action: str | None = None,
        api: str | None = None,
        error: str | None = None,
        count: int = -1,
        topic: str | None = None,
    ) -> None:
        super().__init__(ctx)
        p: dict[str, Any] = {
            "action": action,
            "api": api,
            "error": error,
            "count": count,
            "topic": topic,
        }
        self.validate(p)
        self.p = p
        self.count, self.topic = count, topic
        self.injected = False
        self.recorded = False  # the start op is written: the stop op pairs with it

    @staticmethod
    def validate(p: Mapping[str, Any], n_nodes: int | None = None) -> None:
        """Action, api and error among the known names, count -1 or >= 1, a topic name;
        api, error, count and topic belong to the error action only."""
        params.choice("control", "action", p.get("action"), ACTIONS)
        params.choice("control", "api", p.get("api"), APIS)
        params.choice("control", "error", p.get("error"), ERRORS)
        if p.get("count") is not None:
            params.number("control", "count", p["count"], low=-1, integer=True)
            if p["count"] == 0:
                raise params.ParamError(
                    "control.count=0: a number of requests >= 1, or -1 until the fault ends"
                )
        topic = p.get("topic")
        if topic is not None and (not isinstance(topic, str) or not _TOPIC.match(topic)):
            raise params.ParamError(f"control.topic={topic!r}: not a Kafka topic name")
        action = p.get("action")
        if action not in (None, "error"):
            extra = [k for k in ("api", "error", "topic") if p.get(k) is not None] + (
                ["count"] if p.get("count") not in (None, -1) else []
            )
            if extra:
                raise params.ParamError(
                    f"control.action={action} takes no {', '.join('control.' + k for k in extra)}"
                    " (they belong to action=error)"
                )
        if (p.get("api") is None) != (p.get("error") is None) and not matching_draws(p):
            raise params.ParamError(_no_draw(p))

    def _start(self, targets: TargetSpec) -> dict[str, Any]:
        api = channel(self.ctx.cluster)
        with self.ctx.lock:
            chosen_p = draw(self.p, self.ctx.rng)
        action = chosen_p["action"]
        if action == "error":
            chosen = self.ctx.resolve(targets, default="all")
            nodes = self.ctx.nodes()
            ids = sorted(nodes[n].node_id for n in chosen)
            every = len(chosen) == len(nodes)
            value: dict[str, Any] = {
                "action": "error",
                "api": chosen_p["api"],
                "error": chosen_p["error"],
                "count": self.count,
                "nodes": chosen,
                "node_ids": ids,
            }
            if self.topic:
                value["topic"] = self.topic
            self.info = value
            self.injected = True  # before the call: a heal clears it even if the reply is lost
            reply = api.inject(
                self.id,
                chosen_p["api"],
                chosen_p["error"],
                self.count,
                None if every else ids,
                self.topic,
            )
            value["code"] = _int(reply.get("code"))
            value["applied"] = reply.get("applied") == "true"
        else:
            value = {"action": action, "nodes": self.ctx.node_names()}
            self.info = value
            reply = api.shuffle_leaders() if action == "leaders" else api.rehash_coordinators()
        self.record("start-control", value)
        self.recorded = True
        return value

    def _stop(self) -> None:
        value: dict[str, Any] = {
            k: self.info[k] for k in ("action", "api", "error", "nodes") if k in self.info
        }
        if self.injected:
            try:
                reply = channel(self.ctx.cluster).clear(self.id)
                value["hits"] = _int(reply.get("hits"))
                # 0: the system no longer had it (e.g. its process restarted meanwhile)
                value["cleared"] = _int(reply.get("cleared"))
            except Exception as e:  # the process may be dead: it forgot the fault then
                value["errors"] = [f"clearing {self.id}: {e}"]
        if self.recorded:  # a start that failed has its fault-error op instead
            self.record("stop-control", value)


def _int(text: str | None) -> int | None:
    with contextlib.suppress(TypeError, ValueError):
        return int(text)  # type: ignore[arg-type]
    return None


def sweep(cluster: Cluster, prefix: str) -> int:
    """Clear every control fault whose id starts with `prefix` (this nemesis's), as the
    heal's sweep; 0 when the cluster has no control API or it is down."""
    if not has_control(cluster):
        return 0
    try:
        reply = channel(cluster).clear_prefix(prefix)
    except Exception:
        return 0
    return _int(reply.get("cleared")) or 0
