#!/usr/bin/env bash
# Install what the project needs on a fresh Debian machine, skipping what is already there:
# system packages (apt), Go >= 1.26 (older Go fetches the pinned toolchain itself), poetry, and
# the project's virtualenv (.venv) from poetry.lock.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

poetry_version="2.5.1"
# The real node: libseccomp-dev and pkg-config (runc), containernetworking-plugins (CNI), iptables
# and iproute2 (kubelet, kube-proxy); the images: debootstrap, busybox-static, gcc (pause).
apt_packages=(openssl git make ca-certificates procps libseccomp-dev pkg-config
  containernetworking-plugins iptables iproute2 debootstrap busybox-static gcc libc6-dev)

sudo_() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ! command -v go >/dev/null; then missing+=(golang-go); fi
if [[ ${#missing[@]} -gt 0 ]]; then
  echo ">> apt-get install ${missing[*]}"
  sudo_ apt-get update -qq
  sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The wrapper modules declare go 1.26.0: Go >= 1.21 downloads that toolchain by itself
# (GOTOOLCHAIN=auto); anything older cannot.
go_minor="$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')"
if [[ "$go_minor" -lt 21 ]]; then
  echo "Go $(go env GOVERSION) is too old to fetch the pinned toolchain; install Go >= 1.21" >&2
  exit 1
fi

if ! python3 -c "import poetry, sys; from importlib.metadata import version; sys.exit(version('poetry') != '$poetry_version')" 2>/dev/null; then
  echo ">> pip install poetry==$poetry_version"
  python3 -m pip install -q "poetry==$poetry_version"
fi

stamp=".venv/.installed-$(cat poetry.lock pyproject.toml | sha256sum | cut -c1-16)"
if [[ ! -f "$stamp" ]]; then
  echo ">> poetry install"
  python3 -m poetry config virtualenvs.in-project true
  python3 hack/poetry_simple_api.py install --no-interaction
  rm -f .venv/.installed-*
  touch "$stamp"
fi
