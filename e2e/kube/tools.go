//go:build tools

// Package tools names the programs build.sh builds, so that go.mod and go.sum track them:
// kube-apiserver and etcd for the apiserver-only harness (e2e/kube), and the rest of a one-node
// cluster for e2e/cluster (build.sh --cluster).
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
