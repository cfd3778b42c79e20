//go:build !linux

package topo

import "context"

// Topo is a running test bed; on this system it cannot be built.
type Topo struct{}

// New fails: network namespaces are Linux-only.
func New(context.Context, Options) (*Topo, error) { return nil, ErrNotSupported }

// Do fails: network namespaces are Linux-only.
func (t *Topo) Do(Role, func() error) error { return ErrNotSupported }

// Close does nothing.
func (t *Topo) Close() error { return nil }

// Host returns an empty description.
func (t *Topo) Host(r Role) *Host { return &Host{Role: r} }

// Sweep does nothing.
func Sweep(string) ([]string, error) { return nil, nil }

// Shape fails: there is no test bed.
func (t *Topo) Shape(Profile) error { return ErrNotSupported }

// Gateway is the gateway test bed; on this system it cannot be built.
type Gateway struct{}

// NewGateway fails: network namespaces are Linux-only.
func NewGateway(string) (*Gateway, error) { return nil, ErrNotSupported }

// Host returns an empty description.
func (g *Gateway) Host(GWRole) *Host { return &Host{} }

// NetNSNames returns nothing.
func (g *Gateway) NetNSNames() []string { return nil }

// Close does nothing.
func (g *Gateway) Close() error { return nil }
