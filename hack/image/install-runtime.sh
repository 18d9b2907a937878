#!/usr/bin/env bash
# Install the operators' runtime into a new virtualenv VENV: the locked, hash-checked
# dependencies and the project's wheel from DIST_DIR (made by hack/image/build-wheel.sh), wheels
# only (nothing is compiled), bytecode compiled ahead of time so that nothing is written at run
# time (read-only root filesystem), and no pip, setuptools or wheel inside VENV.
# Run by the Dockerfile's install stage and by hack/tests/test_image_recipe.py.
#
# Usage: install-runtime.sh DIST_DIR VENV
set -euo pipefail
dist="$1"
venv="$2"

# shellcheck source=hack/image/pip.sh
source "$(dirname "${BASH_SOURCE[0]}")/pip.sh"

python3 -m venv --without-pip "$venv"
# The interpreter's pip (or the throwaway one) installs into VENV; the venv never gets one.
pip=(pip_ --python "$venv/bin/python" install --disable-pip-version-check --no-input
  --no-deps --only-binary=:all: --no-compile)
"${pip[@]}" --require-hashes --requirement "$dist/requirements.txt"
"${pip[@]}" "$dist"/opsuite-*-py3-none-any.whl
# Unchecked-hash pycs are used as they are, whatever the sources' timestamps end up as in the
# image layers.
"$venv/bin/python" -m compileall -q -j 0 --invalidation-mode unchecked-hash "$venv/lib"
