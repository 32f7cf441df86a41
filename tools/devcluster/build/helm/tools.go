//go:build tools

// Package tools pins helm's main package so that `go mod tidy` records its dependencies.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
