"""nemesis/options.py: parsing and validation of what a run asks of the nemesis, without
the command line (its errors are the nemesis's own, a ValueError)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ktrial.nemesis import NemesisOptionError, NemesisOptions, parse_faults, parse_params
from ktrial.nemesis.options import check_script


def test_fault_names() -> None:
    assert parse_faults("kill, pause,,kill") == ("kill", "pause")
    assert parse_faults(["kill,pause", "memory"]) == ("kill", "pause", "memory")
    assert parse_faults(None) == () and parse_faults("none") == ()
    assert "restart" not in parse_faults("all")
    with pytest.raises(NemesisOptionError, match=r"unknown fault\(s\) \['nuke'\]"):
        parse_faults("kill,nuke")


def test_fault_parameters() -> None:
    assert parse_params(["toxic.kind=latency", "memory.balloon_bytes=1024"]) == {
        "toxic": {"kind": "latency"},
        "memory": {"balloon_bytes": 1024},
    }
    with pytest.raises(NemesisOptionError, match=r"expected FAULT\.PARAM=VALUE"):
        parse_params(["memory"])
    with pytest.raises(NemesisOptionError, match="accepts"):
        parse_params(["kill.probability=0.1"])


def test_a_bad_script_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "s.toml"
    bad.write_text("entry = 3\n")
    with pytest.raises(NemesisOptionError, match="needs \\[\\[entry\\]\\]"):
        check_script(str(bad))
    good = tmp_path / "g.toml"
    good.write_text('[[entry]]\nat = 1\nfault = "kill"\nduration = 2\n')
    check_script(str(good))
    opts = NemesisOptions(schedule="script", script=str(good))
    assert opts.all_faults() == ["kill"] and not opts.needs_toxiproxy


def test_the_nemesis_does_not_import_click() -> None:
    import ktrial.nemesis.options as mod

    assert "click" not in vars(mod)
    assert issubclass(NemesisOptionError, ValueError)
