"""clusters/brokersec.py and kafka_config.client_listener_security: the CLIENT listener
of a cluster ktrial starts, secured with SASL/PLAIN, TLS or both (no brokers here; the
real cluster is tests/integration/test_security_local.py)."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest
from ktrial.clusters.brokersec import DEFAULT_USER, make_certificates, plan, prepare
from ktrial.clusters.kafka_config import client_listener_security, render_properties
from ktrial.clusters.security import Security, SecurityError

PASSWORD = 'pw-with-"quote"-and-\\'
ALICE = Security(
    {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": PASSWORD,
    }
)


def test_sasl_plain_accepts_exactly_the_clients_login() -> None:
    sec = plan("sasl-plain", ALICE)
    b = sec.broker_config
    assert b["listener.security.protocol.map"] == (
        "CLIENT:SASL_PLAINTEXT,REPLICATION:PLAINTEXT,CONTROLLER:PLAINTEXT"
    )
    assert b["listener.name.client.sasl.enabled.mechanisms"] == "PLAIN"
    assert b["listener.name.client.plain.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'user_alice="pw-with-\\"quote\\"-and-\\\\";'
    )
    assert sec.client == ALICE and sec.tls_dir is None


def test_sasl_plain_without_a_login_generates_one_only_the_clients_know() -> None:
    a, b = plan("sasl-plain", Security()), plan("sasl-plain", Security())
    assert a.client.settings["sasl.username"] == DEFAULT_USER
    pa, pb = a.client.settings["sasl.password"], b.client.settings["sasl.password"]
    assert len(pa) >= 20 and pa != pb
    assert (
        f'user_{DEFAULT_USER}="{pa}"'
        in a.broker_config["listener.name.client.plain.sasl.jaas.config"]
    )


@pytest.mark.parametrize(
    ("kind", "client", "message"),
    [
        ("kerberos", Security(), "use one of sasl-plain, ssl, sasl-ssl"),
        (
            "sasl-plain",
            Security({**ALICE.settings, "sasl.mechanism": "SCRAM-SHA-256"}),
            "sets up the PLAIN mechanism",
        ),
        (
            "ssl",
            ALICE,
            "serves SSL, but the security settings say security.protocol=SASL_PLAINTEXT",
        ),
        (
            "ssl",
            Security({"security.protocol": "SSL", "ssl.ca.location": "/x"}),
            "leave the ssl.* settings out",
        ),
    ],
)
def test_contradictions_are_refused(kind: str, client: Security, message: str) -> None:
    with pytest.raises(SecurityError) as e:
        plan(kind, client, {"ca": "ca.pem", "keystore": "ks.pem"})
    assert message in str(e.value)
    assert PASSWORD not in str(e.value)


def test_tls_listener_settings() -> None:
    b = client_listener_security("SASL_SSL", {"u": "p"}, keystore="/k.pem", truststore="/ca.pem")
    assert b["listener.security.protocol.map"].startswith("CLIENT:SASL_SSL,")
    assert b["listener.name.client.ssl.keystore.type"] == "PEM"
    assert b["listener.name.client.ssl.keystore.location"] == "/k.pem"
    assert b["listener.name.client.ssl.truststore.location"] == "/ca.pem"
    with pytest.raises(ValueError, match="needs a key store"):
        client_listener_security("SSL")
    with pytest.raises(ValueError, match="needs at least one user"):
        client_listener_security("SASL_PLAINTEXT")
    # rendered into server.properties with the backslashes Java reads back
    assert '\\\\"' in render_properties(client_listener_security("SASL_PLAINTEXT", {"u": 'a"b'}))


def test_certificates_verify_and_no_ca_key_is_left(tmp_path: Path) -> None:
    files = make_certificates(tmp_path)
    ks = Path(files["keystore"]).read_text()
    assert ks.startswith("-----BEGIN PRIVATE KEY-----")  # PKCS#8, unencrypted: Kafka's PEM store
    assert ks.count("BEGIN CERTIFICATE") == 2
    assert stat.S_IMODE(Path(files["keystore"]).stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "broker-keystore.pem",
        "broker.crt",
        "ca.pem",
        "san.ext",
    ]
    out = subprocess.run(
        ["openssl", "verify", "-CAfile", files["ca"], str(tmp_path / "broker.crt")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0 and "OK" in out.stdout


def test_prepare_tls_makes_a_private_directory_and_cleanup_removes_it() -> None:
    sec = prepare("sasl-ssl", Security({**ALICE.settings, "security.protocol": "SASL_SSL"}))
    try:
        assert sec.tls_dir is not None
        assert stat.S_IMODE(sec.tls_dir.stat().st_mode) == 0o700
        c = sec.client.settings
        assert c["security.protocol"] == "SASL_SSL" and c["sasl.username"] == "alice"
        assert Path(c["ssl.ca.location"]).is_file()
        assert c["ssl.endpoint.identification.algorithm"] == "none"
    finally:
        sec.cleanup()
    assert not sec.tls_dir.exists()
