"""A wheel built from the repository holds everything ktrial needs at run time.

The repository root is the `ktrial` package (pyproject maps it), so a module or data
file that the explicit package list misses would work in the editable install and
break in a wheel. Build one offline and look inside.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # Build from a copy: setuptools writes build/ and *.egg-info/ beside the sources.
    src = tmp_path_factory.mktemp("src") / "ktrial"
    junk = (".git", ".venv", "store", "build", "*.egg-info", "__pycache__", ".*_cache")
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(*junk))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(src)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (whl,) = out.glob("ktrial-*.whl")
    return whl


def _source_modules() -> set[str]:
    """Every product module in the tree, as wheel paths (tests, bench, scripts excluded)."""
    skip = {"tests", "bench", "scripts", "docs", "build", "store"}
    found = set()
    for p in ROOT.rglob("*.py"):
        rel = p.relative_to(ROOT)
        if rel.parts[0] in skip or rel.parts[0].startswith("."):
            continue
        found.add("ktrial/" + rel.as_posix())
    return found


def test_wheel_has_every_module_and_the_kafka_pom(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = _source_modules() - names
    assert not missing, f"modules left out of the wheel: {sorted(missing)}"
    assert "ktrial/clusters/kafka-maven/pom.xml" in names
    assert not [n for n in names if n.startswith(("ktrial/tests/", "ktrial/bench/"))]


def test_installed_wheel_finds_the_pom_cluster_install_resolves(
    wheel: Path, tmp_path: Path
) -> None:
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)
    t = str(target)
    code = (
        f"import sys; sys.path[:0] = [{t!r}];"
        "import ktrial.cli, ktrial.clusters.install as i;"
        f"assert str(i.POM).startswith({t!r}), i.POM;"
        "assert i.POM.is_file() and 'kafka_2.13' in i.POM.read_text(), i.POM"
    )
    # The wheel's copy is put first on sys.path, so the editable install of the
    # repository (a finder that comes after the path finder) cannot answer instead.
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
