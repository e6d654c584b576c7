#!/usr/bin/env bash
# The test suite as CI runs it: lint and types first (fast, and a failure there is cheap
# to fix), then every test: unit, property and integration tests against real brokers,
# a real Toxiproxy and real faults. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '\033[1m[test]\033[0m %s\n' "$*" >&2; }
step "ruff check"
.venv/bin/ruff check .
step "ruff format --check"
.venv/bin/ruff format --check .
step "mypy"
# mypy names a package after its folder, and this repository's root is the package
# `ktrial`: check it through a link named ktrial, so the result does not depend on what
# the clone's folder is called (and the tests' `import ktrial...` resolve to this code).
link=$(mktemp -d)
trap 'rm -rf "$link"' EXIT
ln -s "$PWD" "$link/ktrial"
(cd "$link" && "$OLDPWD/.venv/bin/mypy" --config-file ktrial/pyproject.toml ktrial)
step "pytest"
# --durations: the slowest tests at the end of the output, where CI logs show them
.venv/bin/pytest --durations=25 "$@"
