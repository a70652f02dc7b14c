//go:build tools

// Package tools pins h2spec (the HTTP/2 conformance tester) for build-tools.sh.
package tools

import _ "github.com/summerwind/h2spec/cmd/h2spec"
