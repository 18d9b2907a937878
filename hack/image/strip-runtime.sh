#!/bin/sh
# The runtime stage's clean-up (Dockerfile), for both bases it is built on: the official
# python:3.11-slim-bookworm (interpreter and pip under /usr/local) and hack/images.py's Debian
# base (python3.11 from Debian packages under /usr, no pip module, ensurepip's wheels in
# /usr/share/python-wheels). No package installer is left: the interpreter's pip, setuptools and
# wheel (if any), ensurepip and its bundled wheels go. The standard library's bytecode is
# compiled now, as the virtualenv's is: nothing is written at run time (read-only root).
set -eu
python=python3
stdlib="$("$python" -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')"
if "$python" -m pip --version >/dev/null 2>&1; then
  "$python" -m pip uninstall --yes --quiet --root-user-action=ignore pip setuptools wheel
fi
rm -rf "$stdlib/ensurepip" /usr/share/python-wheels
"$python" -m compileall -q -j 0 --invalidation-mode unchecked-hash "$stdlib"
