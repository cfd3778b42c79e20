//go:build !linux

package run

import (
	"context"
	"errors"
	"time"

	"sluice/internal/bench/result"
	"sluice/internal/bench/topo"
)

// External drives tests with external netperf binaries; Linux only.
type External struct{}

// NewExternal fails off Linux: the test bed is made of namespaces.
func NewExternal(string, string, *topo.Topo, *topo.Gateway, int) (*External, error) {
	return nil, errors.ErrUnsupported
}

// Close does nothing.
func (e *External) Close() error { return nil }

// Name implements Generator.
func (e *External) Name() string { return "netperf (external)" }

// Run implements Generator.
func (e *External) Run(context.Context, result.Test, time.Duration) (Measurement, error) {
	return Measurement{}, errors.ErrUnsupported
}
