//go:build tools

// Package tools pins the commands that hack/build-tools.sh builds: operator-sdk (for
// `operator-sdk scorecard`) and the scorecard-test binary its basic and olm suites run in a pod.
package tools

import (
	_ "github.com/operator-framework/operator-sdk/cmd/operator-sdk"
	_ "github.com/operator-framework/operator-sdk/images/scorecard-test"
)
