//go:build tools

// Package tools names the two programs build.sh builds, so that go.mod and go.sum track them.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
