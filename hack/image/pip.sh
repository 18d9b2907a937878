# Sourced by build-wheel.sh and install-runtime.sh (bash).
# A pip for "--python VENV install": the interpreter's own, or (Debian's python3.11 has no pip
# module, only ensurepip's wheel) one that ensurepip puts into a throwaway virtualenv.
pip_() {
  if [[ -z "${pip_python:-}" ]]; then
    pip_python=python3
    if ! python3 -m pip --version >/dev/null 2>&1; then
      pip_venv="$(mktemp -d)"
      python3 -m venv "$pip_venv"
      pip_python="$pip_venv/bin/python"
    fi
  fi
  "$pip_python" -m pip "$@"
}
trap 'rm -rf "${pip_venv:-}"' EXIT
