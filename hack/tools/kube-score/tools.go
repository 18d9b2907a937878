//go:build tools

// Package tools pins the commands that hack/build-tools.sh builds.
package tools

import (
	_ "github.com/zegl/kube-score/cmd/kube-score"
)
