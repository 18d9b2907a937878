//go:build tools

// Package tools pins the commands that hack/build-tools.sh builds.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
