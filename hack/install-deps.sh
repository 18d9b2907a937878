#!/usr/bin/env bash
# Install what the project needs on a Debian machine, skipping what is already there: the Debian
# packages of hack/apt-packages (apt-get, the one change outside this directory and the cache),
# poetry in a virtualenv of its own in the cache (never pip into the system Python), and the
# project's virtualenv (.venv, poetry.toml) from poetry.lock. Go is the machine's (make doctor).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

poetry_version="2.5.1"
cache="${OPSUITE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/opsuite}"
poetry_venv="$cache/poetry-$poetry_version"

sudo_() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

missing=()
while read -r p; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' hack/apt-packages)
python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
if [[ ${#missing[@]} -gt 0 ]]; then
  echo ">> apt-get install ${missing[*]}"
  sudo_ apt-get update -qq
  sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! "$poetry_venv/bin/python" -c "import sys; from importlib.metadata import version; sys.exit(version('poetry') != '$poetry_version')" 2>/dev/null; then
  echo ">> poetry $poetry_version into its own virtualenv ($poetry_venv)"
  rm -rf "$poetry_venv"
  python3 -m venv "$poetry_venv"
  # Every package by its hash (hack/poetry_requirements.py writes them for these versions).
  "$poetry_venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps \
    --require-hashes -r hack/image/poetry-requirements.txt
fi

stamp=".venv/.installed-$(cat poetry.lock pyproject.toml poetry.toml | sha256sum | cut -c1-16)"
if [[ ! -f "$stamp" ]]; then
  echo ">> poetry install (.venv)"
  "$poetry_venv/bin/python" hack/poetry_simple_api.py install --no-interaction
  rm -f .venv/.installed-*
  touch "$stamp"
fi
