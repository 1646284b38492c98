#!/usr/bin/env bash
# Rewrite requirements/lock.txt from a fresh environment resolved from pyproject.toml (with the test
# and docs extras), so `make` installs exactly the versions the suite was run with. Run after changing dependencies,
# then run `make test` before committing the new lock.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PYTHON" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q --disable-pip-version-check '.[test,docs]'
{
  echo "# Every Python package turkflow and its tests run with, at the versions the suite last passed with."
  echo "# make installs from this file (then turkflow itself with --no-deps). Regenerate after changing"
  echo "# pyproject.toml's dependencies: scripts/lock.sh"
  # --all: setuptools too (the suite builds turkflow's wheel with it); pip is the venv's own
  "$tmp/venv/bin/pip" freeze --all --disable-pip-version-check | grep -v '^turkflow[= @]' | grep -v '^pip=='
} > requirements/lock.txt
echo "wrote requirements/lock.txt ($(grep -vc '^#' requirements/lock.txt) packages)"
