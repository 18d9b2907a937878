//go:build tools

// Package tools pins BuildKit (buildkitd and buildctl), which builds the operator images without
// a Docker engine.
package tools

import (
	_ "github.com/moby/buildkit/cmd/buildctl"
	_ "github.com/moby/buildkit/cmd/buildkitd"
)
