//go:build tools

// Package tools pins the commands that hack/build-tools.sh builds.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
