"""`ktrial run --nemesis <composite>` is refused before anything starts (exit 254, naming
--nemesis and why) where the backend cannot do it: a one-process system (kfake), an
external cluster without network access or hooks, nodes without namespaces."""

from __future__ import annotations

import pytest
from ktrial.cli import main
from ktrial.clusters import linkproxy


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as e:
        main(["run", "--dry-run", *args])
    out, err = capsys.readouterr()
    return int(e.value.code or 0), out + err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--system", "kfake", "--nemesis", "kill-during-commit"], "one process"),
        (["--system", "kfake", "--nemesis", "rolling-isr-restart"], "one process"),
        (["--system", "kfake", "--nemesis", "partition-then-kill"], "needs partition"),
        (
            ["--cluster", "external", "--bootstrap", "h:9092", "--nemesis", "partition-then-kill"],
            "needs partition, which this cluster refuses",
        ),
        (
            ["--cluster", "external", "--bootstrap", "h:9092", "--nemesis", "kill-during-commit"],
            "--hook kill=",
        ),
        (
            ["--cluster", "external", "--bootstrap", "h:9092", "--nemesis", "asymmetric-link"],
            "needs toxic",
        ),
        (["--no-netns", "--nemesis", "isolate-leader-restart-stale"], "needs partition"),
    ],
)
def test_a_composite_the_backend_cannot_do_is_refused_up_front(
    args: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # an external cluster's link proxies need root and iptables: as if they were missing
    monkeypatch.setattr(linkproxy, "unavailable", lambda: "run ktrial as root")
    code, text = _run([*args, "--seed", "1"], capsys)
    assert code == 254, text
    assert "--nemesis" in text and message in text, text


def test_composites_plan_on_a_local_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    code, text = _run(
        [
            "--nemesis",
            "partition-then-kill,kill-during-commit",
            "--time-limit",
            "60",
            "--seed",
            "2",
        ],
        capsys,
    )
    assert code == 0, text
    assert "partition-then-kill for" in text and "kill-during-commit for" in text
    assert "the txn-coordinator role (resolved through the admin API" in text


def test_external_with_kill_hooks_takes_kill_during_commit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    hooks = ["--hook", "kill=true {name}", "--hook", "start=true {name}"]
    code, text = _run(
        [
            "--cluster",
            "external",
            "--bootstrap",
            "h:9092",
            *hooks,
            "--nemesis",
            "kill-during-commit",
        ],
        capsys,
    )
    assert code == 0, text
