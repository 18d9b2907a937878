#!/usr/bin/env bash
# Build the Go reference operators (benchmark references only, never shipped) into
# .local/bench-reference/bin/: podset, configmapsync, poddebugger. Dependencies are the
# versions go.mod and go.sum pin (-mod=readonly: a build never changes them). `make bench`
# runs this; `make test` never does. Usage: bench/reference/build.sh
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin_dir="$root/.local/bench-reference/bin"
mkdir -p "$bin_dir"
export GOTOOLCHAIN="go$(<"$root/.go-version")" # the Go of hack/build-tools.sh

cd "$here"
for name in podset configmapsync poddebugger; do
  CGO_ENABLED=0 go build -mod=readonly -trimpath -o "$bin_dir/$name" "./cmd/$name"
done
echo "built $(cd "$bin_dir" && echo podset configmapsync poddebugger) in ${bin_dir#"$root"/}"
