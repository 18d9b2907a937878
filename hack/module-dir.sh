#!/usr/bin/env bash
# Print the directory of Go module $2 at the version the tool module in directory $1 pins,
# downloading it first when the module cache lacks it (`go list -m -f {{.Dir}}` prints nothing
# for a module that is not in the cache yet, as on a fresh CI runner).
set -euo pipefail
export GOTOOLCHAIN="go$(<"$(dirname "$0")/../.go-version")" # the Go of hack/build-tools.sh
cd "$1"
go mod download -json "$2" | python3 -c '
import json, sys
info = json.load(sys.stdin)
sys.exit("go mod download: " + info["Error"]) if "Error" in info else print(info["Dir"])
'
