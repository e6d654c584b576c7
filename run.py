"""One ktrial run, end to end: set up -> cluster -> workload + nemesis -> heal ->
drain -> check -> report -> teardown.

A run is an object (`Run`) holding one ExitStack: every resource (cluster, proxies,
nemesis, history writer, live view) is registered the moment it is created, so
errors and Ctrl-C unwind it all by construction. The first Ctrl-C ends the main
phase early (the partial history is still healed, drained briefly, checked and
reported); a second one skips the drain.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import __version__
from .checker import check_file, options_from_test_json
from .clusters.base import Unsupported
from .histories import HistoryWriter, Recorder
from .histories.store import RunDir, create_run, write_json

log = logging.getLogger("ktrial.run")

EXIT_BY_VERDICT: dict[Any, int] = {True: 0, False: 1, "unknown": 2}


@dataclass(frozen=True)
class RunSpec:
    """Everything that decides what a run does; written to test.json."""

    name: str = "queue"
    store: str = "store"
    seed: int | None = None
    time_limit: float = 60.0
    cluster: str = "local"
    nodes: int = 3
    profile: str = "safe"
    kafka_version: str | None = None
    broker_config: dict[str, str] = field(default_factory=dict)
    heap_mb: int = 512
    netns: bool | None = None
    keep_data: bool = False  # local: copy brokers' data dirs into the run directory
    workload: str = "queue"
    workload_opts: dict[str, Any] = field(default_factory=dict)
    nemesis: Any = None  # nemesis.NemesisOptions
    heal_wait: float = 5.0
    drain_timeout: float = 60.0
    node_stats_interval: float = 5.0  # 0: no node-stats samples
    # --cluster external: brokers ktrial did not start (clusters/external.py)
    bootstrap: str = ""
    hooks: dict[str, str] = field(default_factory=dict)
    keep_topics: bool = False
    live: bool = True


@dataclass
class RunOutcome:
    run_dir: RunDir
    results: dict[str, Any] | None
    exit_code: int
    interrupted: bool
    report: Path | None
    error: str | None = None


class _Interrupts:
    """Count SIGINTs instead of raising mid-teardown: the main loop polls `count`."""

    def __init__(self) -> None:
        self.count = 0
        self.event = threading.Event()

    def handler(self, signum: int, frame: object) -> None:
        self.count += 1
        self.event.set()
        if self.count >= 3:
            raise KeyboardInterrupt  # the user insists: unwind now (ExitStack still cleans up)

    @contextlib.contextmanager
    def installed(self) -> Iterator[_Interrupts]:
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        old = signal.signal(signal.SIGINT, self.handler)
        old_term = signal.signal(signal.SIGTERM, self.handler)
        try:
            yield self
        finally:
            signal.signal(signal.SIGINT, old)
            signal.signal(signal.SIGTERM, old_term)


class Run:
    def __init__(self, spec: RunSpec, say: Any = print) -> None:
        self.spec = spec
        self.say = say
        self.seed = spec.seed if spec.seed is not None else random.SystemRandom().randrange(2**31)
        self.interrupts = _Interrupts()
        self.run_dir: RunDir | None = None

    # ------------------------------------------------------------------ phases

    def execute(self) -> RunOutcome:
        spec = self.spec
        run_dir = create_run(spec.store, spec.name)
        self.run_dir = run_dir
        handler = self._log_to(run_dir.logs / "ktrial.log")
        self.say(f"run directory: {run_dir.path}  (seed {self.seed})")
        error: str | None = None
        interrupted = False
        try:
            with self.interrupts.installed():
                try:
                    interrupted = self._main(run_dir)
                except KeyboardInterrupt:
                    interrupted = True
                    self.say("interrupted: tearing down")
                except Exception as e:
                    log.exception("run failed")
                    error = f"{type(e).__name__}: {e}"
                    self.say(f"run failed: {error} (log: {run_dir.logs / 'ktrial.log'})")
            results, report = self._check_and_report(run_dir)
        finally:
            logging.getLogger("ktrial").removeHandler(handler)
            handler.close()
        if error is not None:
            code = 255
        elif results is None:
            code = 2
        else:
            code = EXIT_BY_VERDICT.get(results.get("valid"), 2)
        return RunOutcome(run_dir, results, code, interrupted, report, error)

    def _main(self, run_dir: RunDir) -> bool:
        """Cluster, workload, nemesis, heal, drain. Returns whether the user interrupted."""
        from .nemesis import ClientProxies, Nemesis, NemesisOptions, ScheduleThread, plan_proxies
        from .nemesis.nodestats import NodeStatsSampler
        from .workloads import make_workload

        spec = self.spec
        nem_opts: NemesisOptions = spec.nemesis or NemesisOptions()
        wall_start = time.time()
        with contextlib.ExitStack() as stack:
            cluster = self._make_cluster(stack, nem_opts)
            plan = plan_proxies(spec.nodes) if nem_opts.needs_toxiproxy else None
            if plan is not None:
                cluster.client_advertise = plan.advertise
            if cluster.kind == "external":
                self.say(f"external cluster at {cluster.bootstrap_servers}")
            else:
                self.say(f"starting {spec.nodes} Kafka nodes ({spec.profile} profile)...")
            stack.callback(cluster.teardown)
            stack.callback(self._collect_logs, cluster, run_dir)
            cluster.start(wait=False)
            proxies = None
            if plan is not None:
                proxies = stack.enter_context(
                    ClientProxies(plan, log_path=run_dir.logs / "toxiproxy.log").attach(cluster)
                )
            cluster.wait_ready()
            self.say(f"cluster ready: {cluster.bootstrap_servers}")
            self._check_interrupt()

            workload = make_workload(spec.workload, dict(spec.workload_opts), self.seed)
            wmeta = workload.setup(cluster)
            meta = self._test_json(cluster, wmeta, nem_opts, wall_start)
            run_dir.write_test(meta)

            writer = stack.enter_context(HistoryWriter(run_dir.history))
            recorder = Recorder(writer)
            # wall-clock time of history time 0 (brokers' logs carry wall-clock times)
            meta["history_wall_start"] = time.time() - recorder.now() / 1e9
            nem = Nemesis(
                cluster,
                recorder,
                nem_opts.all_faults(),
                random.Random(self.seed),
                partitions=list(wmeta.get("topics", {})),
                proxies=proxies,
                params=nem_opts.params,
            )
            nem.check_supported()
            stack.callback(nem.close)  # refuses later fault starts, then heals
            if spec.node_stats_interval > 0:
                sampler = NodeStatsSampler(cluster.nodes, recorder, spec.node_stats_interval)
                stack.callback(sampler.start().close)  # closed before the history is

            stop = threading.Event()
            failure: list[BaseException] = []

            def drive() -> None:
                try:
                    workload.run(recorder, stop)
                except BaseException as e:
                    failure.append(e)

            worker = threading.Thread(target=drive, name="ktrial-workload", daemon=True)
            live = self._live_view(recorder)
            interrupted = False
            with live:
                worker.start()
                sched = None
                if nem_opts.faults or nem_opts.schedule == "script":
                    sched = ScheduleThread(nem_opts.make_schedule(), nem).start()
                    stack.callback(sched.close)
                deadline = time.monotonic() + spec.time_limit
                while time.monotonic() < deadline and worker.is_alive():
                    if self.interrupts.event.wait(min(0.5, max(0.0, deadline - time.monotonic()))):
                        interrupted = True
                        break
                stop.set()
                if sched is not None:
                    sched.close()
                nem.heal_all()
                worker.join(120)
            if failure:
                raise RuntimeError(f"workload failed: {failure[0]!r}") from failure[0]
            if interrupted:
                self.say("interrupted: faults healed; draining briefly (Ctrl-C again to skip)")
            if self.interrupts.count < 2:
                if not interrupted and spec.heal_wait > 0:
                    self.say(f"healed; waiting {spec.heal_wait:g}s before the drain")
                    self.interrupts.event.clear()
                    self.interrupts.event.wait(spec.heal_wait)
                if self.interrupts.count < 2:
                    timeout = (
                        spec.drain_timeout if not interrupted else min(15.0, spec.drain_timeout)
                    )
                    self.say("draining: reading every key back from the beginning...")
                    drain = workload.drain(recorder, timeout)
                    meta["drain"] = drain
                    if not drain.get("caught_up", True):
                        self.say(f"drain did not catch up on keys: {drain.get('lagging_keys')}")
            meta.update(workload_results(workload))
            meta["interrupted"] = interrupted
            meta["wall_end"] = time.time()
            run_dir.write_test(meta)
            self.say("tearing down the cluster...")
        return interrupted

    def _check_interrupt(self) -> None:
        if self.interrupts.count:
            raise KeyboardInterrupt

    def _make_cluster(self, stack: contextlib.ExitStack, nem_opts: Any) -> Any:
        spec = self.spec
        if spec.cluster == "external":
            from .clusters.external import ExternalCluster

            ext = ExternalCluster(spec.bootstrap, spec.hooks, keep_topics=spec.keep_topics)
            refused = {
                f: why for f, why in ext.unsupported_faults().items() if f in nem_opts.all_faults()
            }
            if refused:
                raise Unsupported("; ".join(f"{f}: {why}" for f, why in refused.items()))
            return ext
        if spec.cluster == "docker":
            from .clusters.docker import DockerCluster

            return DockerCluster(
                nodes=spec.nodes,
                profile=spec.profile,
                kafka_version=spec.kafka_version,
                broker_config=spec.broker_config,
                heap_mb=spec.heap_mb,
                progress=self.say,
            )
        if spec.cluster != "local":
            raise ValueError(f"cluster backend {spec.cluster!r} is not available; use local")
        from .clusters.local import LocalCluster

        return LocalCluster(
            nodes=spec.nodes,
            profile=spec.profile,
            kafka_version=spec.kafka_version,
            broker_config=spec.broker_config,
            heap_mb=spec.heap_mb,
            use_netns=spec.netns,
            work_root=None,
            save_data_to=self.run_dir.path / "data" if spec.keep_data and self.run_dir else None,
        )

    def _live_view(self, recorder: Recorder) -> contextlib.AbstractContextManager[Any]:
        if not self.spec.live:
            return contextlib.nullcontext()
        from .report.live import LiveView
        from .report.unseen import UnseenCounter

        assert self.run_dir is not None
        return LiveView(
            recorder,
            self.spec.time_limit,
            unseen_fn=UnseenCounter(self.run_dir.history),
            title=f"ktrial {self.spec.name}",
        )

    def _test_json(
        self, cluster: Any, wmeta: dict[str, Any], nem_opts: Any, wall_start: float
    ) -> dict[str, Any]:
        spec = self.spec
        return {
            "ktrial_version": __version__,
            "name": spec.name,
            "seed": self.seed,
            "time_limit": spec.time_limit,
            "wall_start": wall_start,
            "cluster": cluster.metadata(),
            **wmeta,
            "nemesis": nem_opts.to_json(),
            "run": {
                k: v
                for k, v in asdict(spec).items()
                if k not in ("nemesis", "workload_opts", "broker_config")
            },
        }

    def _collect_logs(self, cluster: Any, run_dir: RunDir) -> None:
        """Copy node logs into the run directory before the cluster's work dir goes."""
        for node in cluster.nodes:
            for p in node.log_paths:
                with contextlib.suppress(OSError):
                    shutil.copy2(p, run_dir.logs / f"{node.name}-{Path(p).name}")

    def _check_and_report(self, run_dir: RunDir) -> tuple[dict[str, Any] | None, Path | None]:
        if not run_dir.history.exists():
            self.say("no history was recorded; nothing to check")
            return None, None
        meta = run_dir.read_test()
        self.say("checking the history...")
        results = check_file(run_dir.history, options_from_test_json(meta), meta)
        write_json(run_dir.results, results)
        from .report.html import render_report
        from .report.junit import write_junit

        report = render_report(run_dir.path, results)
        write_junit(run_dir.path, results)
        return results, report

    @staticmethod
    def _log_to(path: Path) -> logging.Handler:
        h = logging.FileHandler(path)
        h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        lg = logging.getLogger("ktrial")
        lg.addHandler(h)
        lg.setLevel(logging.INFO)
        return h


def workload_results(workload: Any) -> dict[str, Any]:
    """What a measuring workload (e.g. txn-cost) reports besides its history, for test.json."""
    results = getattr(workload, "results", None)
    return {"workload_results": results()} if callable(results) else {}


def default_store() -> str:
    return os.environ.get("KTRIAL_STORE", "store")
