"""Keep secrets out of what a run writes and shows (test.json, report.html, junit.xml).

A run records its client and broker settings so a reader knows what was tested, but
settings such as ``sasl.password`` or ``ssl.key.password`` must not land on disk in
clear. :func:`redact` returns a deep copy of a JSON-like value where every such value
is replaced by ``"***"``; the key stays, so a reader still sees the option was set.

A value is secret when its key, compared case-insensitively with ``_`` and ``-`` read
as ``.``, contains ``password``, ``secret``, ``token`` or ``credential``, or is one of
the settings that carry keys and logins whole (:data:`SECRET_KEYS`: JAAS configs, PEM
keys, ``basic.auth.user.info``, ``sasl.oauthbearer.config``). Strings are scanned too:
a ``KEY=VALUE`` pair with a secret key inside a string (an argv item such as
``sasl.password=hunter2``, a JAAS line ``password="x"``) has its value replaced, and a
PEM private key block anywhere is replaced whole. None, booleans and empty strings are
kept: they hide nothing and say "not set".

Pure: imports nothing of ktrial.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MASK = "***"
SECRET_WORDS = ("password", "secret", "token", "credential")
# Settings whose whole value is a secret although no word above is in their name.
SECRET_KEYS = frozenset(
    {
        "sasl.jaas.config",
        "jaas.config",
        "ssl.key",
        "ssl.key.pem",
        "ssl.keystore.key",
        "ssl.keystore.certificate.key",
        "ssl.truststore.key",
        "basic.auth.user.info",
        "sasl.oauthbearer.config",
        "private.key",
    }
)
_PAIR = re.compile(r"""([A-Za-z][A-Za-z0-9_.\-]*)=("[^"]*"|'[^']*'|[^\s;,]*)""")
_PEM = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
    re.DOTALL,
)


def normal_key(key: str) -> str:
    """`SASL_PASSWORD`, `sasl-password` and `sasl.password` all read `sasl.password`."""
    return key.strip().lower().replace("_", ".").replace("-", ".")


def is_secret_key(key: object) -> bool:
    if not isinstance(key, str):
        return False
    k = normal_key(key)
    return any(w in k for w in SECRET_WORDS) or any(
        k == s or k.endswith("." + s) for s in SECRET_KEYS
    )


def redact_text(text: str) -> str:
    """`text` with PEM private keys and the values of secret KEY=VALUE pairs masked."""
    text = _PEM.sub(MASK, text)
    if "=" not in text:
        return text

    def pair(m: re.Match[str]) -> str:
        key, value = m.group(1), m.group(2)
        if is_secret_key(key):
            return f"{key}={MASK}" if value else m.group(0)
        return f"{key}={redact_text(value)}" if "=" in value else m.group(0)

    return _PAIR.sub(pair, text)


def _masked(value: Any) -> Any:
    """What a secret key's value becomes: kept when it hides nothing."""
    if value is None or isinstance(value, bool) or value == "":
        return value
    return MASK


def redact(obj: Any) -> Any:
    """A deep copy of `obj` (dicts, lists, tuples, strings, numbers) with secrets masked."""
    if isinstance(obj, Mapping):
        return {k: _masked(v) if is_secret_key(k) else redact(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact(v) for v in obj]
    if isinstance(obj, str):
        return redact_text(obj)
    return obj
