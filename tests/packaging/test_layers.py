"""The layering the design rests on, checked on the source: imports run one way only.

* click (the command line) is imported only by cli.py and commands/;
* the checker imports no run, cluster, workload, nemesis, report or command code
  (it reads test.json through histories.testmeta);
* histories/ imports nothing else of ktrial.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]  # the repository root is the ktrial package
SKIP = {"tests", "bench", "build", "scripts", "docs", ".venv", ".git"}


def _sources() -> list[Path]:
    out = sorted(ROOT.glob("*.py"))
    for d in sorted(ROOT.iterdir()):
        if d.is_dir() and d.name not in SKIP and (d / "__init__.py").exists():
            out.extend(sorted(d.rglob("*.py")))
    return out


def _imports(path: Path) -> set[str]:
    """Absolute names of the modules `path` imports (relative imports resolved)."""
    package = ["ktrial", *path.relative_to(ROOT).parts[:-1]]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
    return out


def _layer(path: Path) -> str:
    parts = path.relative_to(ROOT).parts
    return parts[0] if len(parts) > 1 else path.stem


def test_the_sources_are_found() -> None:
    layers = {_layer(p) for p in _sources()}
    assert {"checker", "histories", "commands", "nemesis", "workloads", "trial"} <= layers


def test_only_the_command_line_imports_click() -> None:
    users = sorted(
        str(p.relative_to(ROOT))
        for p in _sources()
        if any(m == "click" or m.startswith("click.") for m in _imports(p))
        and _layer(p) not in ("commands", "cli")
    )
    assert users == []


@pytest.mark.parametrize(
    ("layer", "allowed"),
    [
        ("checker", {"checker", "histories"}),
        ("histories", {"histories"}),
    ],
)
def test_a_layer_imports_only_what_is_below_it(layer: str, allowed: set[str]) -> None:
    bad = {}
    for p in _sources():
        if _layer(p) != layer:
            continue
        ours = {m.split(".")[1] for m in _imports(p) if m.startswith("ktrial.") and "." in m}
        # `from .. import __version__` resolves to the package itself
        ours -= {"__version__"}
        if ours - allowed:
            bad[str(p.relative_to(ROOT))] = sorted(ours - allowed)
    assert bad == {}
