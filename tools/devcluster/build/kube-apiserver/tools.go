//go:build tools

// Package tools pins the control-plane main packages (API server, controller-manager, scheduler) so that
// `go mod tidy` records their dependencies and all three build from one k8s.io/kubernetes version.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
