//go:build tools

// Package tools pins the Gateway API conformance suite (sigs.k8s.io/gateway-api/conformance, the
// Go test entry TestConformance in conformance_test.go) and its echo-basic test server for
// build-tools.sh, and sigs.k8s.io/gateway-api itself, whose config/crd/standard holds the CRDs;
// nothing here is ever compiled.
package tools

import (
	// The suite checks that the installed CRDs carry this module's bundle version (consts).
	_ "sigs.k8s.io/gateway-api/pkg/consts"

	_ "sigs.k8s.io/gateway-api/conformance"
	_ "sigs.k8s.io/gateway-api/conformance/echo-basic"
)
