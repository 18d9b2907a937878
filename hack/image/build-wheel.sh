#!/usr/bin/env bash
# Build the project's wheel and the locked requirements of its runtime dependencies (exact
# versions from poetry.lock, with hashes) into OUT_DIR, for hack/image/install-runtime.sh.
# Run by the Dockerfile's builder stage and by hack/tests/test_image_recipe.py.
#
# Usage: build-wheel.sh OUT_DIR [POETRY_VENV]
# POETRY_VENV (default /opt/poetry) gets the pinned poetry and export plugin, and what they depend
# on, each checked against its hash (hack/image/poetry-requirements.txt), unless it already has
# exactly those versions: the test passes a cached one, the image a throwaway one.
set -euo pipefail
poetry_version="2.5.1" # the same as hack/install-deps.sh (a test checks)
export_plugin_version="1.10.1"

out="$(mkdir -p "$1" && cd "$1" && pwd)"
tools="${2:-/opt/poetry}"
# shellcheck source=hack/image/pip.sh
source "$(dirname "${BASH_SOURCE[0]}")/pip.sh"
cd "$(dirname "$0")/../.."

if ! "$tools/bin/python" -c "
import sys
from importlib.metadata import version
sys.exit(version('poetry') != '$poetry_version'
         or version('poetry-plugin-export') != '$export_plugin_version')" 2>/dev/null; then
  # Without ensurepip (Debian's python3 may lack it), as in install-runtime.sh.
  python3 -m venv --clear --without-pip "$tools"
  # Every package by its hash (hack/poetry_requirements.py writes them for these versions).
  pip_ --python "$tools/bin/python" install -q --disable-pip-version-check --no-deps \
    --require-hashes -r hack/image/poetry-requirements.txt
fi

# Plain poetry: building and exporting read pyproject.toml and poetry.lock only, so nothing
# here needs the package index (hack/poetry_simple_api.py is for resolving and installing).
# No virtualenv is created or used for the project: poetry runs inside POETRY_VENV.
export POETRY_VIRTUALENVS_CREATE=false POETRY_NO_INTERACTION=1
"$tools/bin/poetry" check --lock
"$tools/bin/poetry" build --format wheel --output "$out"
"$tools/bin/poetry" export --only main --format requirements.txt --output "$out/requirements.txt"
