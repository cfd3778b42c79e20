//go:build !linux || !(386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package qosmark

import (
	"io"

	"sluice/internal/qos"
)

// Options tune Load (see the Linux implementation).
type Options struct {
	PinDir   string
	Continue bool
	Log      io.Writer
	LinkRate func(ifname string) uint64
}

// Report tells what a successful Load did.
type Report struct {
	Attached []string
	Skipped  []string
}

// StateInfo describes the loaded state.
type StateInfo struct {
	State    State
	Attached []string
	Missing  []string
}

// Enable is not supported here.
func Enable(string) error { return ErrNotSupported }

// Load is not supported here.
func Load(*qos.Ruleset, Options) (*Report, error) { return nil, ErrNotSupported }

// Unload is not supported here.
func Unload(string, io.Writer) error { return ErrNotSupported }

// Disable is not supported here.
func Disable(string) error { return ErrNotSupported }

// GetState reports Disabled: nothing can be loaded here.
func GetState(string) (StateInfo, error) { return StateInfo{State: Disabled}, nil }

// ActiveConfig is not supported here.
func ActiveConfig(string) (string, error) { return "", ErrNotSupported }

// ReadStats is not supported here.
func ReadStats(string) ([]qos.Stats, error) { return nil, ErrNotSupported }

// ResetStats is not supported here.
func ResetStats(string) error { return ErrNotSupported }

// SetLogLevel is not supported here.
func SetLogLevel(string, uint32) error { return ErrNotSupported }

// LogLevel is not supported here.
func LogLevel(string) (uint32, error) { return 0, ErrNotSupported }
