"""trial.py with TLS / SASL settings (clusters/security.py): the cluster's clients get
them, test.json records them masked, and no file of the run directory holds the
password in clear (test.json, results.json, report.html, junit.xml, logs). Fake
cluster and workload; the real-broker run is tests/integration/test_security_local.py."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from ktrial.clusters.security import Security, client_settings
from ktrial.histories.recorder import Recorder
from ktrial.histories.store import load_json
from ktrial.trial import Trial, TrialSpec

PASSWORD = "Tr1al-pa55word-xyz"
SETTINGS = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "alice",
    "sasl.password": PASSWORD,
}


class SecCluster:
    kind = "fake"
    bootstrap_servers = "fake:9092"
    client_advertise = None
    security = Security()

    def __init__(self) -> None:
        self.nodes: list[Any] = []

    def start(self, wait: bool = True) -> None:
        pass

    def wait_ready(self, timeout: float = 120.0) -> None:
        pass

    def unsupported_faults(self) -> dict[str, str]:
        return {}

    def metadata(self) -> dict[str, object]:
        return {"kind": "fake"}

    def teardown(self) -> None:
        pass


class ClientWorkload:
    """Records its clients' settings the way the real workloads do (test.json's
    producer_config), writes one acknowledged send and reads it back."""

    name = "fake"

    def __init__(self) -> None:
        self.producer_config: dict[str, Any] = {}

    def setup(self, cluster: Any) -> dict[str, Any]:
        self.producer_config = client_settings(cluster, {"acks": "all"})
        return {
            "workload": "fake",
            "keys": {"0": {"topic": "t", "partition": 0}},
            "topics": {"t": 1},
            "producer_config": self.producer_config,
        }

    def run(self, recorder: Recorder, stop: threading.Event) -> None:
        p = recorder.new_process()
        inv = recorder.invoke(p, "send", [["send", 0, 1]])
        recorder.complete(inv, "ok", [["send", 0, [0, 1]]])
        inv = recorder.invoke(p, "poll", [["poll"]])
        recorder.complete(inv, "ok", [["poll", {"0": [[0, 1]]}]])
        stop.wait()

    def drain(self, recorder: Recorder, timeout_s: float) -> dict[str, Any]:
        return {"caught_up": True, "lagging_keys": {}}

    def results(self) -> dict[str, Any]:
        return {}


def _files_holding(root: Path, secret: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> tuple[Any, Any, Any]:
    cluster, wl = SecCluster(), ClientWorkload()
    spec = TrialSpec(
        name="sec",
        store=str(tmp_path / "store"),
        seed=3,
        time_limit=0.5,
        heal_wait=0.0,
        node_stats_interval=0.0,
        live=False,
        check_every=0.0,
        argv=("run", "--security-config", f"sasl.password={PASSWORD}"),
        cli_options={"security_config": [f"sasl.password={PASSWORD}"]},
        **kw,
    )
    trial = Trial(spec, say=lambda m: None, workload=wl)
    monkeypatch.setattr(trial, "_make_cluster", lambda nem_opts: cluster)
    return trial.execute(), cluster, wl


def test_the_clients_get_the_settings_and_no_file_of_the_run_holds_the_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, cluster, wl = _run(tmp_path, monkeypatch, security=dict(SETTINGS))
    assert out.exit_code == 0, out.error
    assert cluster.security.settings == SETTINGS
    assert wl.producer_config["sasl.password"] == PASSWORD  # the client did get it
    test = load_json(out.run_dir.test_json)
    assert test["cluster"]["security"] == {**SETTINGS, "sasl.password": "***"}
    assert "security" not in test["run"]
    assert test["producer_config"]["sasl.password"] == "***"
    assert (out.run_dir.path / "report.html").exists() and out.run_dir.junit.exists()
    assert _files_holding(out.run_dir.path, PASSWORD) == []


def test_a_generated_broker_login_is_given_to_the_clients_and_kept_out_of_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    captured: dict[str, Any] = {}
    out, cluster, _ = _run(tmp_path, monkeypatch, broker_security="sasl-plain")
    captured.update(cluster.security.settings)
    assert out.exit_code == 0, out.error
    assert captured["security.protocol"] == "SASL_PLAINTEXT" and captured["sasl.username"]
    generated = captured["sasl.password"]
    assert len(generated) >= 20
    assert _files_holding(out.run_dir.path, generated) == []
