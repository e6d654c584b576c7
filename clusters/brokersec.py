"""TLS and SASL on the clusters ktrial starts: `--broker-security sasl-plain|ssl|sasl-ssl`.

Only the CLIENT listener (what producers, consumers and admin clients use) is
secured; REPLICATION and CONTROLLER stay PLAINTEXT, so the nemesis' partitions and
slow links act on the same traffic as before and the brokers need no credentials of
their own. What a kind sets up:

* ``sasl-plain``: SASL_PLAINTEXT with the PLAIN mechanism. The brokers accept exactly
  the login of the run's security settings (``--security-config-file``: its
  ``sasl.username`` / ``sasl.password``), or, when none was given, a user ``ktrial``
  with a random password that only the run's clients are told.
* ``ssl``: TLS. A throwaway CA and one broker certificate are made with ``openssl``
  in a private temporary directory (mode 0700, removed at teardown); clients trust
  that CA and check the chain but not the host name (the certificate is made before
  the nodes have addresses).
* ``sasl-ssl``: both.

`plan` is pure; `prepare` writes the certificates and returns the broker overrides
and the clients' :class:`~.security.Security`.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .kafka_config import client_listener_security
from .security import Security, SecurityError

KINDS = ("sasl-plain", "ssl", "sasl-ssl")
PROTOCOL = {"sasl-plain": "SASL_PLAINTEXT", "ssl": "SSL", "sasl-ssl": "SASL_SSL"}
DEFAULT_USER = "ktrial"


@dataclass(frozen=True)
class BrokerSecurity:
    """What a secured cluster needs: broker overrides, the clients' settings, the TLS dir."""

    broker_config: dict[str, str]
    client: Security
    tls_dir: Path | None = None

    def cleanup(self) -> None:
        if self.tls_dir is not None:
            shutil.rmtree(self.tls_dir, ignore_errors=True)


def login(kind: str, client: Security) -> tuple[str, str]:
    """The (user, password) the brokers accept: the client's, or a generated one."""
    s = client.settings
    if s.get("sasl.username") and s.get("sasl.password"):
        if s.get("sasl.mechanism", "PLAIN") != "PLAIN":
            raise SecurityError(
                f"--broker-security {kind} sets up the PLAIN mechanism; the security "
                f"settings ask for sasl.mechanism={s['sasl.mechanism']}"
            )
        return s["sasl.username"], s["sasl.password"]
    return DEFAULT_USER, secrets.token_urlsafe(18)


def plan(kind: str, client: Security, tls_files: Mapping[str, str] | None = None) -> BrokerSecurity:
    """Broker overrides and client settings of `kind` (pure but for a generated password).

    `tls_files` (for ssl kinds): ``keystore`` (the broker's PEM key + chain) and ``ca``.
    """
    if kind not in KINDS:
        raise SecurityError(f"--broker-security {kind!r}: use one of {', '.join(KINDS)}")
    if any(k.startswith("ssl.") for k in client.settings):
        raise SecurityError(
            f"--broker-security {kind}: ktrial makes the certificates of the cluster it "
            "starts; leave the ssl.* settings out"
        )
    protocol = PROTOCOL[kind]
    given = client.protocol
    if given != "PLAINTEXT" and given != protocol:
        raise SecurityError(
            f"--broker-security {kind} serves {protocol}, but the security settings say "
            f"security.protocol={given}"
        )
    users: dict[str, str] = {}
    settings: dict[str, str] = {"security.protocol": protocol}
    if kind != "ssl":
        user, password = login(kind, client)
        users[user] = password
        settings.update(
            {"sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password}
        )
    files = dict(tls_files or {})
    if kind != "sasl-plain":
        if not {"keystore", "ca"} <= set(files):
            raise ValueError("TLS needs the broker key store and the CA (prepare() makes them)")
        settings["ssl.ca.location"] = files["ca"]
        settings["ssl.endpoint.identification.algorithm"] = "none"
    overrides = client_listener_security(
        protocol, users=users, keystore=files.get("keystore"), truststore=files.get("ca")
    )
    return BrokerSecurity(overrides, Security(settings))


def make_certificates(dest: Path, openssl: str = "openssl") -> dict[str, str]:
    """A CA and one broker certificate signed by it, as PEM files in `dest`:
    ``ca`` (the CA certificate) and ``keystore`` (broker key, certificate, CA)."""

    def run(*args: str) -> None:
        try:
            subprocess.run([openssl, *args], cwd=dest, check=True, capture_output=True, timeout=60)
        except FileNotFoundError:
            raise SecurityError(
                "--broker-security with TLS needs openssl (Debian package openssl)"
            ) from None
        except subprocess.CalledProcessError as e:
            raise SecurityError(
                f"openssl {args[0]} failed: {e.stderr.decode(errors='replace')[-400:]}"
            ) from None

    days = "7"
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
        "ca.pem", "-days", days, "-subj", "/CN=ktrial test CA")  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key", "-out",
        "broker.csr", "-subj", "/CN=ktrial-broker")  # fmt: skip
    (dest / "san.ext").write_text("subjectAltName=DNS:ktrial-broker,DNS:localhost,IP:127.0.0.1\n")
    run("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "broker.crt", "-days", days, "-extfile", "san.ext")  # fmt: skip
    keystore = dest / "broker-keystore.pem"
    keystore.write_text(
        (dest / "broker.key").read_text()
        + (dest / "broker.crt").read_text()
        + (dest / "ca.pem").read_text()
    )
    for name in ("ca.key", "broker.key", "broker.csr", "ca.srl"):
        (dest / name).unlink(missing_ok=True)  # the CA key is not needed any more
    keystore.chmod(0o600)
    return {"ca": str(dest / "ca.pem"), "keystore": str(keystore)}


def prepare(kind: str, client: Security) -> BrokerSecurity:
    """`plan` with certificates made in a fresh private directory for TLS kinds
    (call `cleanup()` at teardown)."""
    if kind == "sasl-plain":
        return plan(kind, client)
    tls_dir = Path(tempfile.mkdtemp(prefix="ktrial-tls-"))
    os.chmod(tls_dir, 0o700)
    try:
        sec = plan(kind, client, make_certificates(tls_dir))
    except BaseException:
        shutil.rmtree(tls_dir, ignore_errors=True)
        raise
    return BrokerSecurity(sec.broker_config, sec.client, tls_dir)
