//go:build tools

// Package tools names the program build-tools.sh builds (helm), so that go.mod and go.sum track it.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
