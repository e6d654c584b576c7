"""The flags of the ssh backend (`--cluster ssh --node h1,h2,...`), shared by `ktrial run`
and `ktrial cluster clean`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..clusters.sshconn import HOST_KEY_POLICIES, SshOptions, parse_hosts

F = TypeVar("F", bound=Callable[..., Any])


def ssh_options(fn: F) -> F:
    """Add --node and the --ssh-* flags to a command."""
    opts = [
        click.option(
            "--node",
            "ssh_nodes",
            default="",
            metavar="[USER@]HOST[:PORT],...",
            help="--cluster ssh: the hosts, one broker on each (n1 on the first, ...).",
        ),
        click.option(
            "--ssh-user",
            default="root",
            show_default=True,
            help="--cluster ssh: login user (root, or one with password-less sudo).",
        ),
        click.option("--ssh-port", type=click.IntRange(1, 65535), default=22, show_default=True),
        click.option(
            "--ssh-identity",
            default=None,
            metavar="FILE",
            help="--cluster ssh: private key (ssh -i).",
        ),
        click.option(
            "--ssh-known-hosts",
            default=None,
            metavar="FILE",
            help="--cluster ssh: known_hosts file to check host keys against (default: ssh's own).",
        ),
        click.option(
            "--ssh-host-key-check",
            type=click.Choice(HOST_KEY_POLICIES),
            default="yes",
            show_default=True,
            help="--cluster ssh: StrictHostKeyChecking (accept-new trusts a host seen first now).",
        ),
        click.option(
            "--ssh-option",
            "ssh_option",
            multiple=True,
            metavar="KEY=VALUE",
            help="--cluster ssh: any other ssh -o option (e.g. ProxyJump=bastion); repeatable.",
        ),
    ]
    for o in reversed(opts):
        fn = o(fn)
    return fn


def ssh_settings(kw: dict[str, Any]) -> tuple[str, dict[str, Any], int]:
    """(--node as given, SshOptions fields, number of hosts) for --cluster ssh; usage
    errors naming the flag. For another cluster, refuses --node."""
    if kw.get("cluster_kind") != "ssh":
        if kw.get("ssh_nodes"):
            raise click.UsageError("--node needs --cluster ssh")
        return "", {}, 0
    if not kw.get("ssh_nodes", "").strip():
        raise click.UsageError("--cluster ssh needs --node HOST[,HOST...]")
    try:
        hosts = parse_hosts(kw["ssh_nodes"])
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--node") from None
    extra: dict[str, str] = {}
    for item in kw.get("ssh_option") or ():
        k, sep, v = item.partition("=")
        if not sep or not k.strip() or any(c.isspace() for c in k.strip()):
            raise click.BadParameter(f"{item!r}: use KEY=VALUE", param_hint="--ssh-option")
        extra[k.strip()] = v.strip()
    fields: dict[str, Any] = {
        "user": kw["ssh_user"],
        "port": kw["ssh_port"],
        "identity": kw["ssh_identity"],
        "known_hosts": kw["ssh_known_hosts"],
        "host_key_check": kw["ssh_host_key_check"],
        "options": extra,
    }
    SshOptions(**fields)  # validates
    return kw["ssh_nodes"], fields, len(hosts)
