"""`ktrial cluster clean` removes only what ktrial made (clusters/clean.py).

Real processes, directories, cgroups and namespaces stand in for a dead run's
leftovers and for a user's look-alikes. Every real clean here is scoped to the run
ids the test made up (``clean(run_ids=[...])``), so the machine's other clusters are
never at stake; dry runs look at the whole machine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from ktrial.clusters import cgroups, clean, netns
from ktrial.clusters import state as statemod
from ktrial.tests.processes import Procs, dead_pid

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")


def alive(pid: int) -> bool:
    return statemod.is_alive(pid, None)


@pytest.fixture
def state_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "state"
    root.mkdir()
    monkeypatch.setenv("KTRIAL_STATE_DIR", str(root))
    return root


def write_state(root: Path, rid: str, **fields: object) -> Path:
    d = root / rid
    d.mkdir()
    st = {"run_id": rid, "owner_pid": dead_pid(), "owner_start": 1, "status": "started"}
    (d / "state.json").write_text(json.dumps({**st, **fields}))
    return d


def new_rid() -> str:
    return statemod.new_run_id()


# ---------------------------------------------------------------- formats


def test_markers_accept_only_the_run_id_format_ktrial_generates() -> None:
    assert all(clean.RUN_ID_RE.fullmatch(new_rid()) for _ in range(50))
    for bad in (b"notmine", b"abc1234", b"ABC123", b"abc12", b"abc123 ", b""):
        assert not clean.ENVIRON_RE.search(b"A=1\x00KTRIAL_RUN=" + bad + b"\x00B=2"), bad
        assert not clean.CMDLINE_RE.search(b"java\x00-Dktrial.run=" + bad + b"\x00x"), bad
    assert clean.ENVIRON_RE.search(b"KTRIAL_RUN=a1b2c3").group(1) == b"a1b2c3"  # type: ignore[union-attr]
    # the JVM marker must be a whole argument, not part of another one
    assert not clean.CMDLINE_RE.search(b"java\x00-Dxktrial.run=a1b2c3\x00x")
    assert not clean.NETNS_RE.match("kt-a1b2c3-evil")
    assert not clean.CGROUP_RE.match("ktrial-a1b2c3-../x")
    assert clean.rule_run_id("ktrial:a1b2c3") == "a1b2c3"
    assert clean.rule_run_id("ktrial:a1b2c3x") is None and clean.rule_run_id("ktrial:") is None


# ---------------------------------------------------------------- processes


def test_a_users_look_alike_processes_are_never_listed_or_killed(
    procs: Procs, state_root: Path
) -> None:
    stateless = new_rid()  # a well-formed id no ktrial run on this machine has
    notmine = procs.start(["sleep", "60"], KTRIAL_RUN="notmine")
    long_id = procs.start(["sleep", "60"], KTRIAL_RUN="abc1234")
    env_only = procs.start(["sleep", "60"], KTRIAL_RUN=stateless)
    ours = {notmine, long_id, env_only}
    time.sleep(0.2)  # exec done: /proc/<pid>/environ is the new program's
    dry, _ = clean.clean(dry_run=True)
    listed = " ".join(dry.describe())
    assert not [p for p in ours if f"process {p} " in listed], listed
    assert not set(dry.processes) & ours
    removed, _ = clean.clean(run_ids=["notmine", "abc1234", stateless])
    assert not set(removed.processes) & ours
    assert all(alive(p) for p in ours)


def test_owner_check_keeps_a_stateless_jvm_whose_parent_is_alive(
    procs: Procs, state_root: Path
) -> None:
    rid = new_rid()
    code = "import time; time.sleep(60)"
    jvm = procs.start([sys.executable, "-c", code, f"-Dktrial.run={rid}"])
    time.sleep(0.2)
    lo = clean.scan()
    assert lo.marked[jvm].run_id == rid and lo.marked[jvm].jvm
    assert rid in clean.live_run_ids(lo)  # its parent (this test) is alive: its owner may be
    removed, _ = clean.clean(run_ids=[rid])
    assert alive(jvm) and jvm not in removed.processes


def test_a_dead_runs_marked_processes_are_killed(procs: Procs, state_root: Path) -> None:
    rid = new_rid()
    write_state(state_root, rid)
    jvm = procs.start([sys.executable, "-c", "import time; time.sleep(60)", f"-Dktrial.run={rid}"])
    helper = procs.start(["sleep", "60"], KTRIAL_RUN=rid)
    time.sleep(0.2)
    dry, _ = clean.clean(run_ids=[rid], dry_run=True)
    assert set(dry.processes) == {jvm, helper}
    removed, problems = clean.clean(run_ids=[rid])
    assert set(removed.processes) == {jvm, helper} and problems == []
    for p in procs.started:
        p.wait(10)
    assert not alive(jvm) and not alive(helper)
    assert not (state_root / rid).exists()


# ---------------------------------------------------------------- work dirs


def test_a_work_dir_outside_the_work_root_is_refused_not_removed(
    tmp_path: Path, state_root: Path
) -> None:
    victims = []
    for i, name in enumerate(["precious", "ktrial-{rid}-abcd1234"]):
        rid = new_rid()
        victim = tmp_path / "home" / str(i) / name.format(rid=rid)
        (victim / "n1").mkdir(parents=True)
        (victim / "n1" / "thesis.tex").write_text("years of work")
        write_state(state_root, rid, work_dir=str(victim))
        victims.append((rid, victim))
    ids = [r for r, _ in victims]
    dry, _ = clean.clean(run_ids=ids, dry_run=True)
    removed, _ = clean.clean(run_ids=ids)
    for lo in (dry, removed):
        assert not lo.dirs
        text = "\n".join(lo.refused)
        assert all(str(v) in text for _, v in victims), text
    for _, victim in victims:
        assert (victim / "n1" / "thesis.tex").read_text() == "years of work"


def test_a_work_dir_must_look_like_ktrials_even_in_the_temp_dir(state_root: Path) -> None:
    rid = new_rid()
    good = Path(tempfile.mkdtemp(prefix=f"ktrial-{rid}-"))
    (good / "n1" / "data").mkdir(parents=True)
    other = new_rid()
    odd = Path(tempfile.mkdtemp(prefix=f"ktrial-{other}-"))
    (odd / "n1").mkdir()
    (odd / "notes.txt").write_text("not ktrial's")
    wrong_run = new_rid()
    try:
        write_state(state_root, rid, work_dir=str(good))
        write_state(state_root, other, work_dir=str(odd))
        write_state(state_root, wrong_run, work_dir=str(good))  # another run's dir
        assert clean.check_work_dir(str(good), rid, {}) == (good, None)
        assert clean.check_work_dir(str(good), wrong_run, {})[0] is None
        assert clean.check_work_dir(str(odd), other, {})[0] is None
        assert clean.check_work_dir("relative/ktrial-x", rid, {})[0] is None
        removed, _ = clean.clean(run_ids=[other, wrong_run])
        assert odd.is_dir() and good.is_dir() and not removed.dirs
        removed, _ = clean.clean(run_ids=[rid])
        assert list(removed.dirs) == [good] and not good.exists()
    finally:
        shutil.rmtree(good, ignore_errors=True)
        shutil.rmtree(odd, ignore_errors=True)


# ---------------------------------------------------------------- cgroups, netns, dry run


def _hierarchy() -> cgroups.MemoryHierarchy | None:
    try:
        return cgroups.memory_hierarchy()
    except OSError:
        return None


needs_cgroups = pytest.mark.skipif(
    os.geteuid() != 0 or _hierarchy() is None or shutil.which("ip") is None,
    reason="needs root, a memory cgroup hierarchy and ip",
)


def _in_cgroup(cg: Path, argv: list[str]) -> list[str]:
    return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(cg / "cgroup.procs"), *argv]


@needs_cgroups
def test_dry_run_lists_exactly_what_a_real_clean_removes(procs: Procs, state_root: Path) -> None:
    h = _hierarchy()
    assert h is not None
    rid = new_rid()
    wd = Path(tempfile.mkdtemp(prefix=f"ktrial-{rid}-"))
    (wd / "n1").mkdir()
    cg = cgroups.create(h, rid, "n1")
    ns = netns.netns_name(rid, "n1")
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        write_state(state_root, rid, work_dir=str(wd))
        member = procs.start(_in_cgroup(cg, ["sleep", "60"]))
        helper = procs.start(["sleep", "60"], KTRIAL_RUN=rid)
        deadline = time.monotonic() + 5
        while member not in cgroups.pids(cg) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)
        dry, dry_problems = clean.clean(run_ids=[rid], dry_run=True)
        assert f"process {member} in cgroup {cg}" in dry.describe()  # killed by the removal
        assert f"process {helper} (run {rid})" in dry.describe()
        real, problems = clean.clean(run_ids=[rid])
        assert real.describe() == dry.describe() and problems == dry_problems == []
        for p in procs.started:
            p.wait(10)
        assert not alive(member) and not alive(helper)
        assert not cg.exists() and ns not in netns.list_netns() and not wd.exists()
    finally:
        procs.close()  # before the cgroup can go
        subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)
        if cg.exists():
            cgroups.remove(cg)
        shutil.rmtree(wd, ignore_errors=True)


CLEAN_ITSELF = textwrap.dedent(
    """
    import sys
    from ktrial.clusters import clean
    removed, problems = clean.clean(run_ids=[sys.argv[1]])
    print("ALIVE", len(problems))
    for line in removed.refused + problems:
        print(line)
    """
)


@needs_cgroups
def test_clean_never_kills_itself_or_its_ancestors_in_a_matched_cgroup(
    state_root: Path,
) -> None:
    h = _hierarchy()
    assert h is not None
    rid = new_rid()
    cg = cgroups.create(h, rid, "n1")
    try:
        write_state(state_root, rid)
        # `clean` runs from a shell inside the dead run's cgroup (say, a terminal opened there)
        out = subprocess.run(
            _in_cgroup(cg, [sys.executable, "-c", CLEAN_ITSELF, rid]),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, (out.returncode, out.stderr)
        assert out.stdout.startswith("ALIVE"), out.stdout
        assert "this clean or its ancestor" in out.stdout
    finally:
        for pid in cgroups.pids(cg):
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
        cgroups.remove(cg)
        shutil.rmtree(state_root / rid, ignore_errors=True)


def test_a_state_record_not_named_like_a_run_is_ignored(state_root: Path) -> None:
    (state_root / "notes").mkdir()
    (state_root / "notes" / "state.json").write_text(json.dumps({"work_dir": "/tmp"}))
    lo = clean.scan()
    assert "notes" not in lo.states and "notes" not in lo.run_ids()
    clean.clean(run_ids=["notes"])
    assert (state_root / "notes" / "state.json").exists()
