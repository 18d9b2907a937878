//go:build tools

// Package tools pins the commands that hack/build-tools.sh builds.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "go.etcd.io/etcd/etcdctl/v3"
)
