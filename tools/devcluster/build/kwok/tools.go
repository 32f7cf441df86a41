//go:build tools

// Package tools pins KWOK's main package so that `go mod tidy` records its dependencies.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
