"""Secrets never reach test.json, report.html or junit.xml (histories/redact.py and
the functions that write those files), and `redact` itself over nested values."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ktrial.histories.redact import MASK, is_secret_key, redact, redact_text
from ktrial.histories.store import RunDir
from ktrial.histories.testmeta import TestMeta
from ktrial.report.html import render_report
from ktrial.report.junit import write_junit
from ktrial.testing.sample import write_sample_run
from ktrial.workloads import make_workload

SECRET = "hunter2"
PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANhunter2\n-----END PRIVATE KEY-----\n"


def test_key_spellings_that_hold_secrets() -> None:
    secret = [
        "sasl.password",
        "SASL_PASSWORD",
        "ssl.key.password",
        "ssl.keystore.password",
        "Ssl-Truststore-Password",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.token.endpoint.url.token",
        "sasl.jaas.config",
        "listener.name.sasl_ssl.plain.sasl.jaas.config",
        "ssl.key",
        "ssl.key.pem",
        "ssl.keystore.key",
        "basic.auth.user.info",
        "aws_credentials",
        "api_token",
    ]
    plain = ["sasl.username", "ssl.key.location", "bootstrap.servers", "acks", "sub_via", "keys"]
    assert [k for k in secret if not is_secret_key(k)] == []
    assert [k for k in plain if is_secret_key(k)] == []
    assert not is_secret_key(3)


def test_redact_masks_nested_values_and_keeps_keys_and_the_input() -> None:
    obj: dict[str, Any] = {
        "producer_config": {"sasl.password": SECRET, "acks": "all", "SASL_USERNAME": "me"},
        "clients": [{"ssl.key.password": SECRET}, {"ssl.keystore.key": PEM}],
        "secrets": {"a": SECRET},  # a whole section under a secret key
        "token": None,  # not set: nothing to hide, and the reader sees so
        "sasl.password": "",
        "password_required": True,
        "note": f"see {PEM}",
        "numbers": (1, 2),
        "pin": {"password": 1234},
    }
    out = redact(obj)
    assert SECRET not in json.dumps(out) and "1234" not in json.dumps(out)
    assert out["producer_config"] == {"sasl.password": MASK, "acks": "all", "SASL_USERNAME": "me"}
    assert out["clients"] == [{"ssl.key.password": MASK}, {"ssl.keystore.key": MASK}]
    assert out["secrets"] == MASK and out["token"] is None and out["sasl.password"] == ""
    assert out["password_required"] is True and out["numbers"] == [1, 2]
    assert out["note"] == f"see {MASK}\n"
    assert obj["producer_config"]["sasl.password"] == SECRET  # a copy: the input is untouched


def test_secrets_inside_strings_are_masked() -> None:
    assert redact_text("sasl.password=hunter2") == "sasl.password=***"
    assert redact_text("--producer-config=sasl.password=hunter2") == (
        "--producer-config=sasl.password=***"
    )
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="u" password="hunter2";'
    )
    assert SECRET not in redact_text(jaas) and 'username="u"' in redact_text(jaas)
    assert redact_text("acks=all linger.ms=5") == "acks=all linger.ms=5"
    argv = ["ktrial", "run", "--producer-config", "sasl.password=hunter2", "--seed", "3"]
    assert redact(argv) == [
        "ktrial",
        "run",
        "--producer-config",
        "sasl.password=***",
        "--seed",
        "3",
    ]


def _fake_cluster() -> Any:
    return SimpleNamespace(bootstrap_servers="127.0.0.1:9092", create_topics=lambda *a, **k: None)


def test_a_run_with_client_secrets_writes_none_of_them(tmp_path: Path) -> None:
    # the options as `ktrial run --producer-config ... --consumer-config ...` passes them on
    producer = {"sasl.password": SECRET, "ssl.key.password": SECRET, "sasl.username": "me"}
    consumer = {"SASL_PASSWORD": SECRET, "ssl.key.pem": PEM, "sasl.jaas.config": SECRET}
    workload = make_workload("queue", {"producer_config": producer, "consumer_config": consumer}, 1)
    fragment = workload.setup(_fake_cluster())
    assert SECRET in json.dumps(fragment)  # in clear in memory (the clients need it) ...
    rd = RunDir(write_sample_run(tmp_path / "run"))
    meta = TestMeta(
        name="queue",
        seed=1,
        cluster={"broker_config": {"listener.name.sasl_ssl.plain.sasl.jaas.config": SECRET}},
        run={"argv": ["ktrial", "run", "--producer-config", f"sasl.password={SECRET}"]},
        other=dict(fragment),
    )
    meta.write(rd.test_json)
    rd.write_test(meta.to_json())  # the store's own writer masks too
    render_report(rd.path)
    write_junit(rd.path)
    for f in (rd.test_json, rd.report, rd.junit):
        text = f.read_text()
        assert SECRET not in text and "MIIEvQ" not in text, f  # ... never on disk
    written = json.loads(rd.test_json.read_text())
    assert written["producer_config"]["sasl.password"] == MASK  # the option shows as set
    assert written["producer_config"]["sasl.username"] == "me"
    assert written["workload_options"]["consumer_config"]["SASL_PASSWORD"] == MASK
    assert "sasl.password" in rd.report.read_text()


def test_an_older_runs_clear_secrets_are_masked_in_the_report_and_junit(tmp_path: Path) -> None:
    rd = RunDir(write_sample_run(tmp_path / "run"))
    old = json.loads(rd.test_json.read_text())
    old["producer_config"] = {"sasl.password": SECRET}
    rd.test_json.write_text(json.dumps(old))  # written in clear by an older ktrial
    render_report(rd.path)
    write_junit(rd.path)
    assert SECRET not in rd.report.read_text() and SECRET not in rd.junit.read_text()
