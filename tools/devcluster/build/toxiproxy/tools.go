//go:build tools

// Package tools pins toxiproxy's server so that `go mod tidy` records its dependencies.
package tools

import _ "github.com/Shopify/toxiproxy/v2/cmd/server"
