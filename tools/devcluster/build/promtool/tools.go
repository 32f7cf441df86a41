//go:build tools

// Package tools pins promtool's main package so that `go mod tidy` records its dependencies.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
