"""clusters/security.py: one canonical set of TLS / SASL settings, read from a Java-style
properties file and KEY=VALUE items, checked, and mapped onto each client's names.

What matters: every spelling a Kafka user has in a client.properties is read or refused
with the file and line; contradictions are refused before a run; each client gets
settings it accepts (librdkafka really takes them); and the password never appears in
repr, describe() or an error message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ktrial.clusters.brokersec import make_certificates
from ktrial.clusters.security import (
    Security,
    SecurityError,
    client_settings,
    load,
    parse_jaas,
    read_properties,
    security_of,
)

PASSWORD = "s3cr3t-Pa55"


def _file(tmp_path: Path, text: str, name: str = "client.properties") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# ---------------------------------------------------------------- properties syntax


def test_properties_comments_separators_continuations_and_escapes() -> None:
    text = (
        "# a comment\n"
        "! another\n"
        "\n"
        "a=1\n"
        "b : 2\n"
        "c 3\n"
        "  d=  spaced value\n"
        "long=one, \\\n"
        "    two\n"
        "esc=tab\\there\\u0041\\\\x\n"
        "key\\=with\\ eq=v\n"
    )
    got = [(k, v) for k, v, _ in read_properties(text)]
    assert got == [
        ("a", "1"),
        ("b", "2"),
        ("c", "3"),
        ("d", "spaced value"),
        ("long", "one, two"),
        ("esc", "tab\thereA\\x"),
        ("key=with eq", "v"),
    ]
    lines = [n for _, _, n in read_properties(text)]
    assert lines == [4, 5, 6, 7, 8, 10, 11]  # a continued entry is named by its first line


def _escape(s: str, key: bool) -> str:
    out = []
    for i, c in enumerate(s):
        if c in "\\=:#! \t\f" and (key or c == "\\" or (c in " \t\f" and i == 0)):
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        else:
            out.append(c)
    return "".join(out)


@given(
    st.lists(
        st.tuples(
            st.text(st.characters(blacklist_categories=("Cs", "Zl", "Zp")), min_size=1),
            st.text(st.characters(blacklist_categories=("Cs", "Zl", "Zp"))),
        ),
        max_size=5,
    )
)
def test_properties_written_with_escapes_read_back_the_same(pairs: list[tuple[str, str]]) -> None:
    pairs = [(k, v.rstrip(" \t\f")) for k, v in pairs]  # trailing blanks are not kept
    text = "".join(f"{_escape(k, True)}={_escape(v, False)}\n" for k, v in pairs)
    got = [(k, v) for k, v, _ in read_properties(text)]
    assert got == pairs


# ---------------------------------------------------------------- loading


def test_a_client_properties_file_with_pairs_over_it(tmp_path: Path) -> None:
    ca = _file(tmp_path, "-----BEGIN CERTIFICATE-----\n", "ca.pem")
    f = _file(
        tmp_path,
        "security.protocol=sasl_ssl\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.username=alice\n"
        f"sasl.password={PASSWORD}\n"
        "ssl.ca.location=ca.pem\n",  # relative to the file
    )
    sec = load(["sasl.username=bob"], f)
    assert sec.settings == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "bob",
        "sasl.password": PASSWORD,
        "ssl.ca.location": str(ca.resolve()),
    }
    assert sec.sasl and sec.tls and bool(sec)
    assert sec.secrets() == [PASSWORD]


def test_java_spellings_jaas_and_a_pem_truststore_are_read(tmp_path: Path) -> None:
    _file(tmp_path, "pem", "trust.pem")
    f = _file(
        tmp_path,
        "security.protocol=SASL_SSL\n"
        "sasl.mechanisms=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        f'    username="alice" password="{PASSWORD}";\n'
        "ssl.truststore.type=PEM\n"
        "ssl.truststore.location=trust.pem\n"
        "ssl.endpoint.identification.algorithm=none\n",
    )
    s = load([], f).settings
    assert s["sasl.mechanism"] == "PLAIN"
    assert (s["sasl.username"], s["sasl.password"]) == ("alice", PASSWORD)
    assert s["ssl.ca.location"].endswith("trust.pem")


def test_a_jaas_line_with_quotes_and_a_scram_module() -> None:
    got = parse_jaas(
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="a b" '
        'password="p\\"q";',
        "x",
    )
    assert got == {"sasl.username": "a b", "sasl.password": 'p"q'}
    with pytest.raises(SecurityError, match="only PlainLoginModule and ScramLoginModule"):
        parse_jaas("com.sun.security.auth.module.Krb5LoginModule required;", "f:3")


@pytest.mark.parametrize(
    ("text", "pairs", "message"),
    [
        ("sasl.passwrd=x\n", [], "client.properties:1: unknown security setting 'sasl.passwrd'"),
        ("", ["bootstrap.servers=h:1"], "unknown security setting 'bootstrap.servers'"),
        ("security.protocol=TLS\n", [], "security.protocol='TLS'; use one of"),
        ("security.protocol=SASL_SSL\n", [], "needs sasl.mechanism"),
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n",
            [],
            "sasl.mechanism='GSSAPI'; ktrial's clients support",
        ),
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=u\n",
            [],
            "needs sasl.password",
        ),
        ("sasl.username=u\n", [], "sasl.username is set but security.protocol=PLAINTEXT"),
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=u\n"
            "sasl.password=p\nssl.ca.location=/nonexistent\n",
            [],
            "ssl.ca.location is set but security.protocol=SASL_PLAINTEXT",
        ),
        (
            "security.protocol=SSL\nssl.ca.location=/nonexistent/ca.pem\n",
            [],
            "ssl.ca.location=/nonexistent/ca.pem: no such file",
        ),
        (
            "security.protocol=SSL\nssl.truststore.location=/x.jks\n",
            [],
            "ssl.truststore.location is a Java key store",
        ),
        (
            "security.protocol=SSL\nssl.endpoint.identification.algorithm=dns\n",
            [],
            "use https or none",
        ),
    ],
)
def test_bad_settings_are_refused_naming_the_setting(
    tmp_path: Path, text: str, pairs: list[str], message: str
) -> None:
    f = _file(tmp_path, text)
    with pytest.raises(SecurityError) as e:
        load(pairs, f)
    assert message in str(e.value)


def test_mutual_tls_needs_both_halves(tmp_path: Path) -> None:
    cert = _file(tmp_path, "c", "c.pem")
    with pytest.raises(SecurityError, match=r"needs both ssl\.certificate\.location and"):
        load(["security.protocol=SSL", f"ssl.certificate.location={cert}"])


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SecurityError, match=r"--security-config-file .*nope.properties"):
        load([], tmp_path / "nope.properties")


def test_no_error_message_shows_the_password(tmp_path: Path) -> None:
    """An item without '=' may be a password typed in the wrong place; values of bad
    items are never echoed."""
    for pairs in ([PASSWORD], [f"sasl.passw0rd={PASSWORD}"], [f"=={PASSWORD}"]):
        with pytest.raises(SecurityError) as e:
            load(pairs)
        assert PASSWORD not in str(e.value)
    f = _file(tmp_path, f"sasl.jaas.config=Unknown required password={PASSWORD};\n")
    with pytest.raises(SecurityError) as e:
        load([], f)
    assert PASSWORD not in str(e.value)


# ---------------------------------------------------------------- each client's names


def _sasl_ssl(tmp_path: Path) -> Security:
    ca = make_certificates(tmp_path)["ca"]  # a real CA: librdkafka reads it
    return load(
        [
            "security.protocol=SASL_SSL",
            "sasl.mechanism=SCRAM-SHA-256",
            "sasl.username=alice",
            f"sasl.password={PASSWORD}",
            f"ssl.ca.location={ca}",
            "ssl.endpoint.identification.algorithm=none",
        ]
    )


def test_repr_and_describe_never_show_the_password(tmp_path: Path) -> None:
    sec = _sasl_ssl(tmp_path)
    assert PASSWORD not in repr(sec) and PASSWORD not in str(sec)
    d = sec.describe()
    assert d["sasl.password"] == "***" and d["sasl.username"] == "alice"
    assert PASSWORD not in str(d)


def test_librdkafka_takes_the_settings(tmp_path: Path) -> None:
    """confluent-kafka refuses an unknown property at construction: building clients
    with the mapped settings proves the names are librdkafka's."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient

    conf: dict[str, Any] = {"bootstrap.servers": "127.0.0.1:1", **_sasl_ssl(tmp_path).librdkafka()}
    Producer(conf).flush(0)
    Consumer({**conf, "group.id": "g"}).close()
    AdminClient(conf)


def test_worker_names_are_the_canonical_ones(tmp_path: Path) -> None:
    sec = _sasl_ssl(tmp_path)
    assert sec.worker() == dict(sec.settings)


def test_java_properties(tmp_path: Path) -> None:
    j = _sasl_ssl(tmp_path).java()
    assert j["security.protocol"] == "SASL_SSL"
    assert j["sasl.mechanism"] == "SCRAM-SHA-256"
    assert j["sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="alice" password="{PASSWORD}";'
    )
    assert j["ssl.truststore.type"] == "PEM" and j["ssl.truststore.location"].endswith("ca.pem")
    assert j["ssl.endpoint.identification.algorithm"] == ""  # Java's spelling of "none"
    plain = Security({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}).java()
    assert "plain.PlainLoginModule" in plain["sasl.jaas.config"]


def test_a_cluster_without_security_gives_clients_nothing_extra() -> None:
    class Bare:
        pass

    assert not security_of(Bare())
    assert client_settings(Bare(), {"acks": "all"}) == {"acks": "all"}

    class Secured:
        security = Security({"security.protocol": "SSL"})

    assert client_settings(Secured(), {"acks": "1"}) == {"security.protocol": "SSL", "acks": "1"}
    # the run's own overrides win over the cluster's settings
    assert client_settings(Secured(), {"security.protocol": "SASL_SSL"}) == {
        "security.protocol": "SASL_SSL"
    }
