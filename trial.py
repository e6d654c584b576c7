"""One ktrial run, end to end: the only run orchestration (`ktrial run` and the tests use it).

A :class:`Trial` runs named phases in order, each registering what it starts on one
ExitStack, so errors and Ctrl-C unwind everything by construction:

1. ``start_cluster``  - the cluster (and Toxiproxy in front of it when the faults need
   it), ready; or a cluster the caller started and keeps (``cluster=``);
2. ``start_workload`` - the workload builds its topics; test.json is written (before
   the first op) and the history is opened;
3. ``start_faults``   - the nemesis and the node-stats sampler;
4. ``main_phase``     - the workload (and the fault schedule) for ``time_limit`` s, or
   until Ctrl-C, the caller's ``until``, or (``stop_on_anomaly``) the first anomaly the
   running safety check finds (watch.py); faults healed at its end;
5. ``heal_and_drain`` - a quiet wait after the heal, then every key read back;
6. ``finish``         - test.json completed (drain, workload results, end time);

then the cluster is torn down, the history checked and the report written. test.json
is one :class:`~ktrial.histories.testmeta.TestMeta`, written only here. The first
Ctrl-C ends the main phase early (the partial history is still healed, drained
briefly, checked and reported); a second one skips the drain.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import __version__
from .checker import check_file, options_from_test_json
from .clusters.base import Cluster, Unsupported
from .histories import HistoryWriter, Recorder
from .histories.store import RunDir, create_run, write_json
from .histories.testmeta import TestMeta
from .interrupts import handling
from .watch import ChildCheck, Watcher, stopped_early_note

if TYPE_CHECKING:
    from .clusters.security import Security
    from .clusters.system import BrokerSystem
    from .load.generator import LoadGenerator
    from .nemesis import ClientProxies, Nemesis, NemesisOptions
    from .workloads import Workload

log = logging.getLogger("ktrial.run")

EXIT_BY_VERDICT: dict[Any, int] = {True: 0, False: 1, "unknown": 2}
# "The main phase has done enough": called with the live counts, (f, type) -> n.
Until = Callable[[Counter[tuple[str, str]]], bool]


@dataclass(frozen=True)
class TrialSpec:
    """Everything that decides what a run does; written to test.json (its "run" section)."""

    name: str = "queue"
    store: str = "store"
    seed: int | None = None
    time_limit: float = 60.0
    cluster: str = "local"
    nodes: int = 3
    profile: str = "safe"
    kafka_version: str | None = None
    transaction_version: int | None = None  # transaction.version feature at format (4.0+)
    system: str = "kafka"  # what runs on the nodes: kafka | kfake (clusters/system.py)
    system_spec: str = ""  # a node spec file (docker: any broker image, clusters/nodespec.py)
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
    # TLS / SASL (clusters/security.py): the clients' canonical settings (never written
    # to test.json in clear), and for a local cluster the CLIENT listener to set up
    security: dict[str, str] = field(default_factory=dict)
    broker_security: str = ""  # "", sasl-plain, ssl or sasl-ssl (clusters/brokersec.py)
    use_existing_topics: bool = False  # topics made beforehand: checked and emptied
    # --cluster ssh: one node per host (clusters/ssh.py); how to reach them (SshOptions fields)
    ssh_nodes: str = ""
    ssh: dict[str, Any] = field(default_factory=dict)
    live: bool = True
    # safety checks of the history while the main phase runs (watch.py); 0: only the final one
    check_every: float = 60.0
    stop_on_anomaly: bool = False  # end the main phase at the first anomaly a running check finds
    liveness_bad: bool = False  # liveness violations make the run invalid (soak jobs)
    soak: bool = False  # asked for with --soak (the preset in commands/run.py), for the record
    load: Any = None  # load.generator.LoadOptions: background load (--load), or None
    # How the run was asked for (test.json "argv" and "cli_options"; `ktrial run --from`)
    argv: tuple[str, ...] = ()
    cli_options: dict[str, Any] = field(default_factory=dict)


@dataclass
class TrialOutcome:
    run_dir: RunDir
    results: dict[str, Any] | None
    exit_code: int
    interrupted: bool
    report: Path | None
    error: str | None = None
    meta: TestMeta = field(default_factory=TestMeta)  # what was written to test.json
    counts: dict[str, int] = field(default_factory=dict)  # "f:type" -> ops recorded

    @property
    def drain(self) -> dict[str, Any]:
        """What the drain returned ({} when it did not run)."""
        return self.meta.drain or {}


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
        with handling(self.handler):
            yield self


class Trial:
    """One run. `cluster`, `workload` and `run_dir` may be given by a caller that already
    has them (a test's shared cluster); a given cluster is neither started nor torn down."""

    def __init__(
        self,
        spec: TrialSpec,
        say: Callable[[str], Any] = print,
        *,
        cluster: Cluster | None = None,
        workload: Workload | None = None,
        run_dir: RunDir | None = None,
        until: Until | None = None,
    ) -> None:
        self.spec = spec
        self.say = say
        self.seed = spec.seed if spec.seed is not None else random.SystemRandom().randrange(2**31)
        self.interrupts = _Interrupts()
        self.run_dir: RunDir | None = run_dir
        self.meta = TestMeta()
        self.interrupted = False
        self.counts: dict[str, int] = {}
        self._given_cluster = cluster
        self._given_workload = workload
        self._until = until
        self._watcher: Watcher | None = None
        self._broker_security: dict[str, str] = {}  # broker overrides of --broker-security

    def execute(self) -> TrialOutcome:
        spec = self.spec
        run_dir = self.run_dir or create_run(spec.store, spec.name)
        self.run_dir = run_dir
        handler = self._log_to(run_dir.logs / "ktrial.log")
        self.say(f"run directory: {run_dir.path}  (seed {self.seed})")
        error: str | None = None
        try:
            with self.interrupts.installed():
                try:
                    self._phases(run_dir)
                except KeyboardInterrupt:
                    self.interrupted = True
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
        return TrialOutcome(
            run_dir, results, code, self.interrupted, report, error, self.meta, self.counts
        )

    def _phases(self, run_dir: RunDir) -> None:
        nem_opts = self.nemesis_options()
        for line in fault_plan_lines(self.spec, self.seed, nem_opts):
            self.say(line)
        self.meta = TestMeta(
            ktrial_version=__version__,
            name=self.spec.name,
            seed=self.seed,
            time_limit=self.spec.time_limit,
            wall_start=time.time(),
        )
        with contextlib.ExitStack() as stack:
            cluster, proxies = self.start_cluster(stack, run_dir, nem_opts)
            workload, recorder = self.start_workload(stack, cluster, run_dir, nem_opts)
            nem = self.start_faults(stack, cluster, recorder, proxies, nem_opts, workload)
            load = self.start_load(stack, cluster, run_dir)
            self.main_phase(stack, workload, recorder, nem, nem_opts)
            if load is not None:
                self.stop_load(load)
            self.heal_and_drain(workload, recorder)
            self.finish(workload, recorder, run_dir)
            if self._given_cluster is None:
                self.say("tearing down the cluster...")

    # ------------------------------------------------------------------ phases

    def start_cluster(
        self, stack: contextlib.ExitStack, run_dir: RunDir, nem_opts: NemesisOptions
    ) -> tuple[Cluster, ClientProxies | None]:
        """A ready cluster (Toxiproxy in front when the faults need it); unwound by `stack`."""
        from .nemesis import ClientProxies, plan_proxies

        if self._given_cluster is not None:
            if nem_opts.needs_toxiproxy:
                raise Unsupported("toxic faults need a cluster the run starts itself")
            return self._given_cluster, None
        spec = self.spec
        client = self._secure(stack)
        cluster = self._make_cluster(nem_opts)
        if client:
            setattr(cluster, "security", client)  # noqa: B010 (not in the Cluster protocol)
        if spec.use_existing_topics:
            setattr(cluster, "use_existing_topics", True)  # noqa: B010
        # an external cluster's proxies are made once its brokers are known (linkfront)
        link = nem_opts.needs_toxiproxy and cluster.kind == "external"
        plan = plan_proxies(spec.nodes) if nem_opts.needs_toxiproxy and not link else None
        if plan is not None:
            cluster.client_advertise = plan.advertise
        if cluster.kind == "external":
            self.say(f"external cluster at {cluster.bootstrap_servers}")
        else:
            what = getattr(getattr(cluster, "system", None), "name", "apache-kafka")
            if getattr(cluster, "installed_system", None) is not None:
                self.say(f"driving {spec.nodes} installed {what} nodes (nothing uploaded)...")
            elif what == "apache-kafka":
                self.say(f"starting {spec.nodes} Kafka nodes ({spec.profile} profile)...")
            else:
                self.say(f"starting {spec.nodes} {what} nodes...")
        stack.callback(cluster.teardown)
        stack.callback(self._collect_logs, cluster, run_dir)
        cluster.start(wait=False)
        proxies = None
        if plan is not None:
            proxies = stack.enter_context(
                ClientProxies(plan, log_path=run_dir.logs / "toxiproxy.log").attach(cluster)
            )
        cluster.wait_ready()
        if link:
            from .clusters.linkfront import front_external

            proxies = stack.enter_context(front_external(cluster, run_dir.logs))
            setattr(cluster, "link", proxies.metadata())  # noqa: B010 (test.json cluster)
            self.say(f"clients redirected through Toxiproxy: {proxies.plan.ports}")
        self.say(f"cluster ready: {cluster.bootstrap_servers}")
        if self.interrupts.count:
            raise KeyboardInterrupt
        return cluster, proxies

    def start_workload(
        self,
        stack: contextlib.ExitStack,
        cluster: Cluster,
        run_dir: RunDir,
        nem_opts: NemesisOptions,
    ) -> tuple[Workload, Recorder]:
        """The workload's topics; test.json written before the first op; the history opened."""
        from .workloads import make_workload

        spec = self.spec
        workload = self._given_workload or make_workload(
            spec.workload, dict(spec.workload_opts), self.seed
        )
        fragment = workload.setup(cluster)
        self.meta.cluster = cluster.metadata()
        self.meta.cluster.update(_security_record(cluster))
        self.meta.other = dict(fragment)
        self.meta.other.setdefault("consumer_rewinds", True)  # drivers rewind (workloads/rewind.py)
        self.meta.nemesis = {**nem_opts.to_json(), "families": nem_opts.all_faults()}
        self.meta.run = {
            k: v
            for k, v in asdict(spec).items()
            if k
            not in (
                "nemesis",
                "workload_opts",
                "broker_config",
                "argv",
                "cli_options",
                "security",
                "load",
            )
        }
        if spec.liveness_bad or spec.soak:
            self.meta.checker = {"liveness_bad": spec.liveness_bad, "soak": spec.soak}
        if profile_checker := _profile_checker(self.meta.cluster):
            # the checker options the system's client profile needs (the run's win)
            self.meta.checker = {**profile_checker, **(self.meta.checker or {})}
        if spec.argv:
            self.meta.argv = list(spec.argv)  # TestMeta.write masks secrets (histories.redact)
        if spec.cli_options:
            self.meta.cli_options = {**spec.cli_options, "seed": self.seed}
        self.meta.write(run_dir.test_json)
        recorder = Recorder(stack.enter_context(HistoryWriter(run_dir.history)))
        # wall-clock time of history time 0 (brokers' logs carry wall-clock times)
        self.meta.history_wall_start = time.time() - recorder.now() / 1e9
        return workload, recorder

    def start_faults(
        self,
        stack: contextlib.ExitStack,
        cluster: Cluster,
        recorder: Recorder,
        proxies: ClientProxies | None,
        nem_opts: NemesisOptions,
        workload: Workload | None = None,
    ) -> Nemesis:
        """The nemesis (healing on the way out) and the sampler of the nodes' memory."""
        from .nemesis import Nemesis
        from .nemesis.nodestats import NodeStatsSampler

        # the transactional ids and groups whose coordinators role targets aim at
        keys_of = getattr(workload, "coordinator_keys", None)
        keys: dict[str, list[str]] = keys_of() if callable(keys_of) else {}

        nem = Nemesis(
            cluster,
            recorder,
            nem_opts.all_faults(),
            random.Random(self.seed),
            partitions=list(self.meta.topics),
            proxies=proxies,
            params=nem_opts.params,
            transactional_ids=keys.get("transactional_ids"),
            groups=keys.get("groups"),
        )
        nem.check_supported()
        attach = getattr(cluster, "attach_recorder", None)  # ssh: host outages, harness errors
        if callable(attach):
            stack.callback(attach(recorder, self.say))  # detached after the heal below
        stack.callback(nem.close)  # refuses later fault starts, then heals
        if proxies is not None:  # a Toxiproxy that dies cuts every client off: say so
            from .nemesis.harness import HarnessWatch

            watch = HarnessWatch({"Toxiproxy": proxies.server}, recorder, self.say).start()
            stack.callback(watch.close)  # before the proxies are stopped on purpose
        if self.spec.node_stats_interval > 0:
            sampler = NodeStatsSampler(cluster.nodes, recorder, self.spec.node_stats_interval)
            stack.callback(sampler.start().close)  # closed before the history is
        return nem

    def start_load(
        self, stack: contextlib.ExitStack, cluster: Cluster, run_dir: RunDir
    ) -> LoadGenerator | None:
        """The background load (--load): its topic created like the workload's, then
        ktrial-loadgen writing load.jsonl; stopped by `stack` on error and Ctrl-C."""
        opts = self.spec.load
        if opts is None:
            return None
        from .load.generator import LoadGenerator

        cluster.create_topics({opts.topic: opts.partitions}, replication_factor=opts.replication)
        gen = LoadGenerator(
            opts,
            cluster.bootstrap_servers,
            run_dir.path / "load.jsonl",
            run_dir.logs / "loadgen.log",
        )
        self.meta.load = {**opts.to_json(), "program": gen.cmd[0], "telemetry": "load.jsonl"}
        stack.callback(gen.stop)
        gen.start()
        self.say(
            f"load: {opts.rate:g} msg/s offered to {opts.topic} ({opts.partitions} partitions, "
            f"{opts.producers} producers, {opts.consumers} consumers); telemetry load.jsonl"
        )
        return gen

    def stop_load(self, gen: LoadGenerator) -> None:
        """Stop the load as the main phase ends, before the drain; its exit status recorded."""
        code = gen.stop()
        if self.meta.load is not None:
            self.meta.load["exit_code"] = code
        if code not in (0, None):
            self.say(f"load generator exited with status {code} (log: logs/loadgen.log)")

    def main_phase(
        self,
        stack: contextlib.ExitStack,
        workload: Workload,
        recorder: Recorder,
        nem: Nemesis,
        nem_opts: NemesisOptions,
    ) -> None:
        """The workload and the fault schedule until the time is up; then every fault healed."""
        from .nemesis import ScheduleThread

        stop = threading.Event()
        failure: list[BaseException] = []

        def drive() -> None:
            try:
                workload.run(recorder, stop)
            except BaseException as e:
                failure.append(e)

        worker = threading.Thread(target=drive, name="ktrial-workload", daemon=True)
        watcher = self._start_watcher(stack, recorder)
        with self._live_view(recorder, watcher):
            worker.start()
            sched = None
            if nem_opts.faults or nem_opts.schedule == "script":
                schedule = nem_opts.make_schedule(self.seed)
                # history time the schedule's clock starts at: a script's `at` counts from
                # here (`ktrial faults export` writes the faults back relative to it)
                if self.meta.nemesis is not None:
                    self.meta.nemesis["schedule_start_s"] = round(recorder.now() / 1e9, 6)
                sched = ScheduleThread(schedule, nem).start()
                stack.callback(sched.close)
            self.interrupted = self._wait_main_phase(worker, recorder)
            if watcher is not None:
                watcher.close()
                self._end_watch(watcher, recorder)
            stop.set()
            if sched is not None:
                sched.close()
            nem.heal_all()
            worker.join(120)
        if failure:
            raise RuntimeError(f"workload failed: {failure[0]!r}") from failure[0]

    def heal_and_drain(self, workload: Workload, recorder: Recorder) -> None:
        """After the heal: a quiet wait, then every key read back (briefly after a Ctrl-C,
        not at all after a second one)."""
        spec = self.spec
        if self.interrupted:
            self.say("interrupted: faults healed; draining briefly (Ctrl-C again to skip)")
        if self.interrupts.count >= 2:
            return
        if not self.interrupted and spec.heal_wait > 0:
            self.say(f"healed; waiting {spec.heal_wait:g}s before the drain")
            self.interrupts.event.clear()
            self.interrupts.event.wait(spec.heal_wait)
        if self.interrupts.count >= 2:
            return
        timeout = spec.drain_timeout if not self.interrupted else min(15.0, spec.drain_timeout)
        self.say("draining: reading every key back from the beginning...")
        drain = workload.drain(recorder, timeout)
        self.meta.drain = drain
        if not drain.get("caught_up", True):
            self.say(f"drain did not catch up on keys: {drain.get('lagging_keys')}")

    def finish(self, workload: Workload, recorder: Recorder, run_dir: RunDir) -> None:
        """test.json completed: a measuring workload's results, the interruption, the end."""
        results = getattr(workload, "results", None)  # e.g. txn-cost's table
        if callable(results):
            self.meta.workload_results = results()
        self.meta.interrupted = self.interrupted
        self.meta.wall_end = time.time()
        self.meta.write(run_dir.test_json)
        self.counts = {f"{f}:{t}": n for (f, t), n in sorted(recorder.counts.items())}

    # ------------------------------------------------------------------ helpers

    def nemesis_options(self) -> NemesisOptions:
        """The run's nemesis options with every default decided (the fitted interval)."""
        from .nemesis import NemesisOptions

        nem: NemesisOptions = self.spec.nemesis or NemesisOptions()
        return nem.resolved(self.spec.time_limit)

    def _wait_main_phase(self, worker: threading.Thread, recorder: Recorder) -> bool:
        """Until the time limit, the workload's end or `until`; True if the user interrupted."""
        deadline = time.monotonic() + self.spec.time_limit
        while time.monotonic() < deadline and worker.is_alive():
            if self.interrupts.event.wait(min(0.5, max(0.0, deadline - time.monotonic()))):
                return True
            if self._until is not None and self._until(recorder.snapshot()[1]):
                break
            if self._watcher is not None and self._watcher.stop_requested.is_set():
                break
        return False

    def _start_watcher(self, stack: contextlib.ExitStack, recorder: Recorder) -> Watcher | None:
        """The running safety check (watch.py), when asked for; closed by `stack` too."""
        if self.spec.check_every <= 0:
            return None
        assert self.run_dir is not None
        child = ChildCheck(self.run_dir.history, self.run_dir.test_json)
        watcher = Watcher(
            child,
            self.spec.check_every,
            stop_on_anomaly=self.spec.stop_on_anomaly,
            say=self.say,
            journal=self.run_dir.path / "watch.jsonl",
            clock=lambda: recorder.now() / 1e9,
            cancel=child.cancel,
        )
        self._watcher = watcher
        stack.callback(watcher.close)
        return watcher.start()

    def _end_watch(self, watcher: Watcher, recorder: Recorder) -> None:
        """test.json's ``watch`` section; ``stopped_early`` when the watcher ended the run."""
        section = watcher.summary()
        if watcher.stop_requested.is_set() and not self.interrupted:
            section["stopped_early"] = {
                "at_s": round(recorder.now() / 1e9, 3),
                "types": sorted(watcher.found),
            }
        self.meta.watch = section

    def _secure(self, stack: contextlib.ExitStack) -> Security:
        """The clients' TLS / SASL settings (--security-config); with --broker-security
        also the brokers' CLIENT listener (certificates removed when the stack unwinds)."""
        from .clusters.security import Security

        client = Security(dict(self.spec.security))
        if self.spec.broker_security:
            from .clusters.brokersec import prepare

            sec = prepare(self.spec.broker_security, client)
            stack.callback(sec.cleanup)
            self._broker_security = sec.broker_config
            client = sec.client
        return client

    def _make_cluster(self, nem_opts: NemesisOptions) -> Cluster:
        spec = self.spec
        if spec.cluster == "external":
            from .clusters.external import ExternalCluster

            ext = ExternalCluster(spec.bootstrap, spec.hooks, keep_topics=spec.keep_topics)
            from .nemesis.composite import refusals

            limits = ext.unsupported_faults()
            families = nem_opts.all_faults()
            refused = {f: why for f, why in limits.items() if f in families}
            refused.update(refusals(families, limits))
            if refused:
                raise Unsupported("; ".join(f"{f}: {why}" for f, why in refused.items()))
            return ext
        if spec.cluster == "docker":
            from .clusters.docker import DockerCluster

            return DockerCluster(nodes=spec.nodes, progress=self.say, system=build_system(spec))
        if spec.cluster == "ssh":
            from .clusters.ssh import SshCluster
            from .clusters.sshconn import SshOptions, parse_hosts

            if spec.system_spec:  # a system installed on the hosts (clusters/installed.py)
                from .clusters.installed import InstalledSshCluster, load_installed

                return InstalledSshCluster(
                    parse_hosts(spec.ssh_nodes),
                    load_installed(spec.system_spec),
                    SshOptions(**spec.ssh),
                )
            return SshCluster(
                parse_hosts(spec.ssh_nodes), SshOptions(**spec.ssh), system=build_system(spec)
            )
        if spec.cluster not in ("local", "kfake"):  # kfake: the local backend running kfake
            raise ValueError(f"cluster backend {spec.cluster!r} is not available; use local")
        from .clusters.local import LocalCluster

        return LocalCluster(
            nodes=spec.nodes,
            system=build_system(spec, self._broker_security),
            use_netns=spec.netns,
            work_root=None,
            save_data_to=self.run_dir.path / "data" if spec.keep_data and self.run_dir else None,
        )

    def _live_view(
        self, recorder: Recorder, watcher: Watcher | None = None
    ) -> contextlib.AbstractContextManager[Any]:
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
            watch_fn=watcher.status if watcher is not None else None,
        )

    def _collect_logs(self, cluster: Cluster, run_dir: RunDir) -> None:
        """Copy node logs into the run directory before the cluster's work dir goes."""
        fetch = getattr(cluster, "fetch_logs", None)  # nodes on other hosts (ssh)
        if callable(fetch):
            fetch(run_dir.logs)
            return
        for node in cluster.nodes:
            for p in node.log_paths:
                with contextlib.suppress(OSError):
                    shutil.copy2(p, run_dir.logs / f"{node.name}-{Path(p).name}")

    def _check_and_report(self, run_dir: RunDir) -> tuple[dict[str, Any] | None, Path | None]:
        if not run_dir.history.exists():
            self.say("no history was recorded; nothing to check")
            return None, None
        meta = TestMeta.read(run_dir.test_json)  # what was written is what is checked
        self.say("checking the history...")
        results = check_file(run_dir.history, options_from_test_json(meta), meta.to_json())
        note_watch(results, meta)
        write_json(run_dir.results, results)
        from .report.html import render_report
        from .report.index import refresh_index
        from .report.junit import write_junit

        report = render_report(run_dir.path, results)
        write_junit(run_dir.path, results)
        refresh_index(run_dir)  # the store's index.html (report/index.py); never raises
        return results, report

    @staticmethod
    def _log_to(path: Path) -> logging.Handler:
        h = logging.FileHandler(path)
        h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        lg = logging.getLogger("ktrial")
        lg.addHandler(h)
        lg.setLevel(logging.INFO)
        return h


def note_watch(results: dict[str, Any], meta: TestMeta) -> None:
    """Tell the final results what the running check did: a run it stopped early (the
    report's first warning, and ``stopped_early``), and any anomaly it found that the
    final check does not confirm (which would be a ktrial bug: the final check rules)."""
    watch = meta.watch or {}
    note = stopped_early_note(watch, meta.time_limit)
    warned: list[str] = []
    if note is not None:
        results["stopped_early"] = watch["stopped_early"]
        warned.append(note)
    found = watch.get("found")
    unconfirmed = sorted(set(found) - set(results.get("bad_error_types") or ())) if found else []
    if unconfirmed:
        warned.append(
            f"the running check found {', '.join(unconfirmed)}, which the final check does "
            "not confirm; the final check decides the verdict (please report this)"
        )
    if warned:
        results["warnings"] = [*warned, *results.get("warnings", [])]


def _security_record(cluster: Cluster) -> dict[str, Any]:
    """test.json's record of how clients reached the cluster (secrets as "***") and of
    topics made beforehand; {} for a plain cluster that created its topics."""
    from .clusters.security import security_of

    out: dict[str, Any] = {}
    sec = security_of(cluster)
    if sec:
        out["security"] = sec.describe()
    if getattr(cluster, "use_existing_topics", False):
        out["use_existing_topics"] = True
        out["emptied_topics"] = dict(getattr(cluster, "emptied_topics", {}))
    return out


def run_workload(
    cluster: Cluster,
    workload: Workload,
    run_dir: RunDir,
    seed: int,
    time_limit: float,
    drain_timeout: float = 60.0,
    until: Until | None = None,
) -> TrialOutcome:
    """A run without faults on a cluster the caller started and keeps: the same phases as
    `ktrial run` (setup, main phase, drain, check, report) with no quiet wait before the
    drain, no live view and no running safety check."""
    spec = TrialSpec(
        name=run_dir.path.parent.name,
        seed=seed,
        time_limit=time_limit,
        workload=workload.name,
        heal_wait=0.0,
        drain_timeout=drain_timeout,
        live=False,
        check_every=0.0,
    )
    return Trial(
        spec, say=lambda _: None, cluster=cluster, workload=workload, run_dir=run_dir, until=until
    ).execute()


def default_store() -> str:
    return os.environ.get("KTRIAL_STORE", "store")


# ---------------------------------------------------------------------- the system


def _profile_checker(cluster: object) -> dict[str, Any]:
    """The checker options in a cluster's metadata (its system's client profile)."""
    profile = cluster.get("client_profile") if isinstance(cluster, dict) else None
    checker = profile.get("checker") if isinstance(profile, dict) else None
    return dict(checker) if isinstance(checker, dict) else {}


def system_name(spec: TrialSpec) -> str:
    """The system a run puts on its nodes ("kafka", "kfake"); `--cluster kfake` is the
    local backend running kfake."""
    return "kfake" if spec.cluster == "kfake" else spec.system


def build_system(spec: TrialSpec, extra_config: Mapping[str, str] | None = None) -> BrokerSystem:
    """The BrokerSystem of a run (clusters/system.py): a node spec's, kfake, or Apache
    Kafka with the run's version, profile, broker settings, heap and transaction protocol.
    ValueError (a node spec's SpecError too) when it cannot be made."""
    from .clusters.system import system_for

    config = {**spec.broker_config, **dict(extra_config or {})}
    if spec.system_spec:
        return system_for(spec_file=spec.system_spec)
    if system_name(spec) == "kfake":
        return system_for("kfake", broker_config=config)
    return system_for(
        "kafka",
        version=spec.kafka_version,
        profile=spec.profile,
        broker_config=config,
        heap_mb=spec.heap_mb,
        transaction_version=spec.transaction_version,
    )


# ---------------------------------------------------------------------- the plan


def planned_node_names(spec: TrialSpec) -> list[str] | None:
    """The node names a run's cluster will have, when they are known before it starts
    (local and docker: n1..nN); None for an external cluster (discovered)."""
    if spec.cluster == "external":
        return None
    return [f"n{i}" for i in range(1, spec.nodes + 1)]


def describe_targets(targets: Any) -> str:
    if targets is None:
        return "the family's default targets"
    if isinstance(targets, (list, tuple)):
        return ", ".join(str(t) for t in targets)
    if targets == "controller":
        return "the active controller (resolved when the fault fires)"
    if targets in ("leaders", "leader"):
        return "the leader of one of the workload's partitions (resolved when the fault fires)"
    from .nemesis.targets import AT_FAULT_TIME

    if targets in AT_FAULT_TIME:
        return f"the {targets} role (resolved through the admin API when the fault fires)"
    return f"{targets} (nodes drawn when the fault fires)"


def fault_plan_lines(spec: TrialSpec, seed: int, nem_opts: NemesisOptions) -> list[str]:
    """What the nemesis will do, as far as it is known before the cluster exists: the
    schedule, its faults with nominal times and targets, and the families the time limit
    leaves out. [] when the run asks for no faults."""
    families = nem_opts.all_faults()
    if not families:
        return []
    nem_opts = nem_opts.resolved(spec.time_limit)
    entries = nem_opts.preview(spec.time_limit, seed, planned_node_names(spec))
    if nem_opts.schedule == "interval":
        how = f"interval schedule: each fault held {nem_opts.interval:g} s after as long quiet"
        if spec.nemesis is None or spec.nemesis.interval is None:
            how += f" (fitted: {len(families)} families in {spec.time_limit:g} s)"
    elif nem_opts.schedule == "stable":
        how = (
            f"stable schedule: {nem_opts.period:g} s periods, quiet with probability "
            f"{nem_opts.quiet_p:g}, else up to 2 faults together"
        )
    else:
        how = f"scripted schedule: {nem_opts.script}"
    lines = [f"faults: {how}; seed {seed}"]
    for e in entries:
        params = ", ".join(f"{k} {v}" for k, v in e.params.items())
        hold = "until the end" if e.duration is None else f"for {e.duration:g} s"
        lines.append(
            f"  {e.at:7.1f} s  {e.fault:<9} {hold} on {describe_targets(e.targets)}"
            + (f" ({params})" if params else "")
        )
    counts = Counter(e.fault for e in entries)
    reached = ", ".join(f"{f} ×{counts[f]}" for f in families if counts[f])
    lines.append(f"  families: {reached or 'none within the time limit'}")
    missing = [f for f in families if not counts[f]]
    if missing:
        lines.append(
            f"  warning: {', '.join(missing)} will not run within {spec.time_limit:g} s "
            "(lengthen --time-limit or shorten --nemesis-interval); the verdict will be "
            "unknown"
        )
    return lines
