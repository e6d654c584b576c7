"""How clients reach a TLS or SASL cluster: one set of security settings for every client.

A run's security settings come from ``--security-config-file PATH`` (a Java-style
``.properties`` file, as Kafka users keep for their own clients) and
``--security-config KEY=VALUE`` (repeatable, wins over the file). They are read into
one canonical set, :class:`Security`, whose names are the ones Kafka users know:

=======================================  =================================================
``security.protocol``                    PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
``sasl.mechanism``                       PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
``sasl.username`` / ``sasl.password``    the SASL login
``ssl.ca.location``                      PEM file of the CA(s) to trust (default: the system's)
``ssl.certificate.location``             PEM client certificate (mutual TLS), with
``ssl.key.location``                     its PEM private key, and
``ssl.key.password``                     the key's passphrase, if any
``ssl.endpoint.identification.algorithm``  ``https`` (check the broker's host name) or ``none``
=======================================  =================================================

Java spellings are read too: ``sasl.mechanisms``, ``sasl.jaas.config`` (a
PlainLoginModule / ScramLoginModule line: its username and password are taken) and
``ssl.truststore.location`` with ``ssl.truststore.type=PEM``. Anything else is refused
with the list of known names, so a setting is never silently ignored.

From the one set, each client gets its own names: :meth:`Security.librdkafka` (the
confluent driver and every admin client), :meth:`Security.worker` (the JSON-lines
worker contract, docs/drivers.md: the canonical names) and :meth:`Security.java`
(Java client properties). The password never appears in ``repr`` or in
:meth:`Security.describe` (what test.json records); histories.redact masks it
wherever else a setting is written.

Pure, but for reading the properties file and checking that named files exist.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
FILE_KEYS = ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location")
KEYS = (
    "security.protocol",
    "sasl.mechanism",
    "sasl.username",
    "sasl.password",
    *FILE_KEYS,
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
)
SECRET = ("sasl.password", "ssl.key.password")
# Spellings of other clients, read as the canonical name.
ALIASES = {
    "sasl.mechanisms": "sasl.mechanism",
    "sasl.user": "sasl.username",
    "ssl.ca.pem.location": "ssl.ca.location",
}
_JAAS_FIELD = re.compile(r"""\b(username|password)\s*=\s*("(?:[^"\\]|\\.)*"|'[^']*'|[^\s;]+)""")


class SecurityError(ValueError):
    """Bad security settings; the message names the setting (and file:line) and the fix."""


@dataclass(frozen=True)
class Security:
    """The canonical security settings of a run ({} = PLAINTEXT, nothing to set)."""

    settings: Mapping[str, str] = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:
        return f"Security({self.describe()!r})"

    # ---------------------------------------------------------------- what it is
    @property
    def protocol(self) -> str:
        return self.settings.get("security.protocol", "PLAINTEXT")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    def __bool__(self) -> bool:
        return self.protocol != "PLAINTEXT" or bool(self.settings)

    def secrets(self) -> list[str]:
        """The secret values (to check that no file of a run holds them)."""
        return [self.settings[k] for k in SECRET if self.settings.get(k)]

    def describe(self) -> dict[str, str]:
        """For test.json and the report: every setting, secrets as "***"."""
        return {k: ("***" if k in SECRET and v else v) for k, v in sorted(self.settings.items())}

    # ---------------------------------------------------------------- each client's names
    def librdkafka(self) -> dict[str, str]:
        """librdkafka (confluent-kafka) properties: producers, consumers, admin clients.
        The canonical names are librdkafka's (it reads sasl.mechanism as sasl.mechanisms)."""
        return dict(self.settings)

    def worker(self) -> dict[str, str]:
        """The worker contract's names (docs/drivers.md, "Security"): the canonical ones."""
        return dict(self.settings)

    def java(self) -> dict[str, str]:
        """Java client properties (the Java worker, kafka-*.sh tools)."""
        s = self.settings
        out = {"security.protocol": self.protocol}
        if self.sasl:
            mech = s.get("sasl.mechanism", "PLAIN")
            module = (
                "org.apache.kafka.common.security.plain.PlainLoginModule"
                if mech == "PLAIN"
                else "org.apache.kafka.common.security.scram.ScramLoginModule"
            )
            out["sasl.mechanism"] = mech
            out["sasl.jaas.config"] = (
                f"{module} required username={_jaas_quote(s.get('sasl.username', ''))} "
                f"password={_jaas_quote(s.get('sasl.password', ''))};"
            )
        if "ssl.ca.location" in s:
            out["ssl.truststore.type"] = "PEM"
            out["ssl.truststore.location"] = s["ssl.ca.location"]
        if "ssl.certificate.location" in s:
            # Java's PEM key store wants the key and the chain in one file.
            out["ssl.keystore.type"] = "PEM"
            out["ssl.keystore.location"] = s["ssl.certificate.location"]
            if s.get("ssl.key.password"):
                out["ssl.key.password"] = s["ssl.key.password"]
        if "ssl.endpoint.identification.algorithm" in s:
            alg = s["ssl.endpoint.identification.algorithm"]
            out["ssl.endpoint.identification.algorithm"] = "" if alg == "none" else alg
        return out


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


# -------------------------------------------------------------------- parsing


def parse_jaas(text: str, where: str) -> dict[str, str]:
    """username/password (and the mechanism a PLAIN module implies) of a JAAS line."""
    out: dict[str, str] = {}
    if "PlainLoginModule" in text:
        out["sasl.mechanism"] = "PLAIN"
    elif "ScramLoginModule" not in text:
        raise SecurityError(
            f"{where}: sasl.jaas.config: only PlainLoginModule and ScramLoginModule are "
            "understood; give sasl.mechanism, sasl.username and sasl.password instead"
        )
    for m in _JAAS_FIELD.finditer(text):
        v = m.group(2)
        if v[:1] in "\"'":
            v = re.sub(r"\\(.)", r"\1", v[1:-1]) if v[0] == '"' else v[1:-1]
        out[f"sasl.{m.group(1)}"] = v
    if "sasl.username" not in out or "sasl.password" not in out:
        raise SecurityError(f"{where}: sasl.jaas.config has no username=... password=...")
    return out


def read_properties(text: str, name: str = "<text>") -> list[tuple[str, str, int]]:
    """Java .properties text -> (key, value, line number) in order (pure).

    Comments start with # or !; a key ends at the first unescaped '=', ':' or blank;
    a line ending in an odd number of backslashes continues on the next; escapes
    \\t \\n \\r \\f \\uXXXX, any other backslash keeps the next character.
    """
    out: list[tuple[str, str, int]] = []
    lines = re.split(r"\r\n|\r|\n", text)  # Java's line ends only (not str.splitlines')
    i = 0
    while i < len(lines):
        start = i + 1
        line = lines[i].lstrip(_BLANKS)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(_BLANKS)
            i += 1
        if _continues(line):
            line = line[:-1]
        key, value = _split_pair(line)
        out.append((_unescape(key), _unescape(value), start))
    return out


_BLANKS = " \t\f"  # Java's white space in properties (not Python's str.strip set)


def _continues(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _split_pair(line: str) -> tuple[str, str]:
    j = 0
    while j < len(line):
        c = line[j]
        if c == "\\":
            j += 2
            continue
        if c in "=: \t\f":
            break
        j += 1
    key, rest = line[:j], line[j:].lstrip(_BLANKS)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_BLANKS)
    return key, rest


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out, j = [], 0
    while j < len(s):
        c = s[j]
        if c == "\\" and j + 1 < len(s):
            nxt = s[j + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", s[j + 2 : j + 6]):
                out.append(chr(int(s[j + 2 : j + 6], 16)))
                j += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            j += 2
            continue
        out.append(c)
        j += 1
    return "".join(out)


def _canonical(
    items: Iterable[tuple[str, str, str]], base: Path | None
) -> tuple[dict[str, str], dict[str, str]]:
    """(key, value, where) items -> canonical settings, and where each came from."""
    settings: dict[str, str] = {}
    origin: dict[str, str] = {}
    truststore: tuple[str, str] | None = None
    truststore_type = ""
    for raw_key, value, where in items:
        key = ALIASES.get(raw_key.strip(), raw_key.strip())
        value = value.strip()
        if key == "sasl.jaas.config":
            for k, v in parse_jaas(value, where).items():
                settings[k], origin[k] = v, where
            continue
        if key == "ssl.truststore.location":
            truststore = (value, where)
            continue
        if key == "ssl.truststore.type":
            truststore_type = value.upper()
            continue
        if key not in KEYS:
            raise SecurityError(
                f"{where}: unknown security setting {raw_key!r}; known: {', '.join(KEYS)} "
                "(and the Java spellings sasl.mechanisms, sasl.jaas.config, "
                "ssl.truststore.location with ssl.truststore.type=PEM)"
            )
        if key in FILE_KEYS and base is not None and value and not Path(value).is_absolute():
            value = str(base / value)
        settings[key], origin[key] = value, where
    if truststore is not None:
        if truststore_type != "PEM":
            raise SecurityError(
                f"{truststore[1]}: ssl.truststore.location is a Java key store; clients here "
                "need the CA as a PEM file: ssl.ca.location=ca.pem (export it with "
                "`keytool -exportcert -rfc -keystore TRUSTSTORE -alias ALIAS > ca.pem`), or "
                "set ssl.truststore.type=PEM if the file already is PEM"
            )
        path = truststore[0]
        if base is not None and not Path(path).is_absolute():
            path = str(base / path)
        settings.setdefault("ssl.ca.location", path)
        origin.setdefault("ssl.ca.location", truststore[1])
    return settings, origin


def validate(settings: Mapping[str, str], origin: Mapping[str, str] | None = None) -> None:
    """Refuse settings that contradict each other or name missing files (SecurityError)."""
    where = dict(origin or {})

    def at(k: str) -> str:
        return where.get(k, "--security-config")

    proto = settings.get("security.protocol", "PLAINTEXT")
    if proto not in PROTOCOLS:
        raise SecurityError(
            f"{at('security.protocol')}: security.protocol={proto!r}; use one of "
            f"{', '.join(PROTOCOLS)}"
        )
    sasl_keys = [k for k in settings if k.startswith("sasl.")]
    if proto.startswith("SASL_"):
        mech = settings.get("sasl.mechanism")
        if mech is None:
            raise SecurityError(
                f"{at('security.protocol')}: security.protocol={proto} needs "
                f"sasl.mechanism ({', '.join(MECHANISMS)})"
            )
        if mech not in MECHANISMS:
            raise SecurityError(
                f"{at('sasl.mechanism')}: sasl.mechanism={mech!r}; ktrial's clients support "
                f"{', '.join(MECHANISMS)}"
            )
        missing = [k for k in ("sasl.username", "sasl.password") if not settings.get(k)]
        if missing:
            raise SecurityError(f"security.protocol={proto} needs {' and '.join(missing)}")
    elif sasl_keys:
        raise SecurityError(
            f"{at(sasl_keys[0])}: {sasl_keys[0]} is set but security.protocol={proto}; "
            "use SASL_PLAINTEXT or SASL_SSL"
        )
    ssl_keys = [k for k in settings if k.startswith("ssl.")]
    if ssl_keys and proto not in ("SSL", "SASL_SSL"):
        raise SecurityError(
            f"{at(ssl_keys[0])}: {ssl_keys[0]} is set but security.protocol={proto}; "
            "use SSL or SASL_SSL"
        )
    if ("ssl.certificate.location" in settings) != ("ssl.key.location" in settings):
        raise SecurityError("mutual TLS needs both ssl.certificate.location and ssl.key.location")
    alg = settings.get("ssl.endpoint.identification.algorithm")
    if alg is not None and alg not in ("https", "none"):
        raise SecurityError(
            f"{at('ssl.endpoint.identification.algorithm')}: "
            f"ssl.endpoint.identification.algorithm={alg!r}; use https or none"
        )
    for k in FILE_KEYS:
        if k in settings and not Path(settings[k]).is_file():
            raise SecurityError(f"{at(k)}: {k}={settings[k]}: no such file")


def load(pairs: Iterable[str] = (), path: str | Path | None = None) -> Security:
    """The run's security: the file's settings, then `pairs` (KEY=VALUE) over them.

    Relative file names inside the file are relative to the file. Errors name the
    file and line, or the --security-config item.
    """
    items: list[tuple[str, str, str]] = []
    base: Path | None = None
    if path is not None:
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as e:
            raise SecurityError(f"--security-config-file {p}: {e.strerror or e}") from None
        base = p.resolve().parent
        items += [(k, v, f"{p}:{n}") for k, v, n in read_properties(text, str(p))]
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SecurityError(f"--security-config expects KEY=VALUE, got {_masked_pair(pair)}")
        items.append((key, value, f"--security-config {key.strip()}"))
    file_items = [i for i in items if not i[2].startswith("--")]
    settings, origin = _canonical(file_items, base)
    more, more_origin = _canonical([i for i in items if i[2].startswith("--")], None)
    settings.update(more)
    origin.update(more_origin)
    if "security.protocol" in settings:
        settings["security.protocol"] = settings["security.protocol"].upper()
    if "sasl.mechanism" in settings:
        settings["sasl.mechanism"] = settings["sasl.mechanism"].upper()
    validate(settings, origin)
    return Security(settings)


def _masked_pair(pair: str) -> str:
    """An item for an error message: nothing after a '=', nothing of an item without one
    (either might be a password)."""
    key, sep, _ = pair.partition("=")
    return f"{key.strip()}=..." if sep else "(an item without '=')"


def security_of(cluster: Any) -> Security:
    """The security settings clients of `cluster` need (none for a backend without any)."""
    sec = getattr(cluster, "security", None)
    return sec if isinstance(sec, Security) else Security()


def client_settings(cluster: Any, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """librdkafka overrides for a client of `cluster`: its security, then `overrides`."""
    return {**security_of(cluster).librdkafka(), **dict(overrides or {})}
