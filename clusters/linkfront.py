"""Toxiproxy in front of brokers ktrial did not start, with the run's connections
redirected through it (the rules: clusters/linkproxy.py, which says why this way).

``front_external(cluster, log_dir)`` is what ``ktrial run --cluster external --nemesis
toxic`` enters once the brokers are discovered: a proxy per broker (its upstream the
broker's advertised address), the redirect rules and the run's group, a check that a
connection to every broker passes its proxy; closing it writes the final connection
counts to ``logs/link-proxies.json``, removes the rules and stops the server.
"""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..nemesis.proxies import ClientProxies, plan_proxies
from .base import Cluster
from .linkproxy import HOW, LinkError, LinkRedirect, groups_of, plan_redirects, unavailable

log = logging.getLogger("ktrial.clusters.linkproxy")


@dataclass
class LinkProxies(ClientProxies):
    """ClientProxies in front of brokers ktrial did not start, with the run's connections
    redirected to them; `connections()` counts what went through each proxy."""

    stats_path: Path | None = None
    redirect: LinkRedirect | None = None
    brokers: dict[str, str] = field(default_factory=dict)  # node -> advertised host:port

    def connections(self, nodes: Iterable[str] | None = None) -> dict[str, int] | None:
        """Client connections redirected through each node's proxy so far (None: unknown)."""
        if self.redirect is None:
            return None
        try:
            counts = self.redirect.counts()
        except (LinkError, OSError, subprocess.SubprocessError) as e:
            log.warning("cannot read the link rules' counters: %s", e)
            return None
        wanted = set(nodes) if nodes is not None else set(counts)
        return {n: c for n, c in counts.items() if n in wanted}

    def metadata(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "how": HOW,
            "api": f"{self.server.host}:{self.server.port}",
            "proxies": {
                n: {"broker": self.brokers.get(n), "proxy": self.plan.listen(n)}
                for n in self.plan.ports
            },
        }
        if self.redirect is not None:
            out["gid"] = self.redirect.gid
            out["comment"] = self.redirect.comment
            for r in self.redirect.redirects:
                out["proxies"][r.node].setdefault("addresses", []).append(f"{r.address}:{r.port}")
        return out

    def close(self) -> None:
        """Counts written, rules removed, then the server stopped; idempotent."""
        if self.redirect is not None:
            final = self.connections()
            if self.stats_path is not None and final is not None:
                with contextlib.suppress(OSError):
                    self.stats_path.write_text(
                        json.dumps({**self.metadata(), "connections": final}, indent=1) + "\n"
                    )
            self.redirect.remove()
            self.redirect = None
        super().close()


def front_external(cluster: Cluster, log_dir: Path) -> LinkProxies:
    """Toxiproxy in front of every discovered broker of `cluster`, the run's connections
    redirected through it and checked; close the result to undo all of it."""
    why = unavailable()
    if why:
        raise LinkError(why)
    brokers = {n.name: (str(n.address), int(getattr(n, "port", 0))) for n in cluster.nodes}
    plan = plan_proxies(list(brokers))
    proxies = LinkProxies(
        plan,
        log_path=log_dir / "toxiproxy.log",
        stats_path=log_dir / "link-proxies.json",
        brokers={n: f"{h}:{p}" for n, (h, p) in brokers.items()},
    )
    try:
        proxies.attach(cluster)
        redirect = LinkRedirect(plan_redirects(brokers, plan.ports))
        proxies.redirect = redirect
        redirect.install()
        server_pid = proxies.server.pid
        if server_pid is not None and redirect.gid in groups_of(server_pid):
            raise LinkError("the Toxiproxy server would be redirected to itself")
        deadline = time.monotonic() + 10
        while True:
            try:
                redirect.verify()
                break
            except LinkError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    except BaseException:
        proxies.close()
        raise
    log.info("link proxies: %s", proxies.metadata())
    return proxies
