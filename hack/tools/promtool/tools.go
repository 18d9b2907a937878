//go:build tools

// Package tools pins promtool for hack/build-tools.sh: `make lint` checks the charts' alerting
// rules with `promtool check rules` and runs their unit tests with `promtool test rules`.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
