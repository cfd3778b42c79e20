package ipfctl

import (
	"io"

	"sluice/internal/bpf/qosmark"
	"sluice/internal/qos"
)

// DefaultQoSPinDir is where the IPQoS datapath keeps its state.
const DefaultQoSPinDir = qosmark.DefaultPinDir

// The IPQoS datapath's types, as ipqosadmin uses them.
type (
	// QoSState is the IPQoS state, numbered like ipqosadmin -state's exit
	// code.
	QoSState = qosmark.State
	// QoSStateInfo describes the loaded state.
	QoSStateInfo = qosmark.StateInfo
	// QoSReport tells what a load did.
	QoSReport = qosmark.Report
)

// The IPQoS states.
const (
	QoSDisabled  = qosmark.Disabled
	QoSError     = qosmark.Error
	QoSEnabled   = qosmark.Enabled
	QoSFiltering = qosmark.Filtering
)

// QoSLoadOptions modify QoS.Load.
type QoSLoadOptions struct {
	// Continue skips an adapter that fails and loads the others; the
	// default restores the previous configuration on any error.
	Continue bool
	// Log receives progress messages; nil discards them.
	Log io.Writer
}

// QoS is the IPQoS kernel datapath as ipqosadmin drives it.
type QoS interface {
	State() (QoSStateInfo, error)
	// Load makes rs the active configuration; on an error (without
	// Continue) the previous one stays.
	Load(rs *qos.Ruleset, opts QoSLoadOptions) (*QoSReport, error)
	Unload(log io.Writer) error
	// Resync attaches the active configuration to the adapters it names
	// that are not marked now (they appeared, or came back, since the
	// load); it does nothing when no configuration is loaded.
	Resync(log io.Writer) (*QoSReport, error)
	// Config returns the active configuration's text ("" when none).
	Config() (string, error)
	// Stats returns the counters (nil when nothing is loaded).
	Stats() ([]qos.Stats, error)
	ResetStats() error
	LogLevel() (uint32, error)
	SetLogLevel(level uint32) error
}

// QoSBackend returns the IPQoS datapath pinned in dir ("" =
// DefaultQoSPinDir).
func QoSBackend(dir string) QoS {
	if dir == "" {
		dir = DefaultQoSPinDir
	}
	return qosKernel{dir}
}

type qosKernel struct{ dir string }

func (q qosKernel) State() (QoSStateInfo, error) {
	si, err := qosmark.GetState(q.dir)
	return si, permissionHint(err)
}

func (q qosKernel) Load(rs *qos.Ruleset, opts QoSLoadOptions) (*QoSReport, error) {
	// the marker goes behind the filter on egress: NAT's egress half in
	// the filter's programs would end the chain before it (natw)
	if err := natEgressOff(PinDir()); err != nil {
		return nil, permissionHint(err)
	}
	rep, err := qosmark.Load(rs, qosmark.Options{PinDir: q.dir, Continue: opts.Continue, Log: opts.Log})
	return rep, permissionHint(err)
}

func (q qosKernel) Unload(log io.Writer) error { return permissionHint(qosmark.Unload(q.dir, log)) }

func (q qosKernel) Resync(log io.Writer) (*QoSReport, error) {
	if err := natEgressOff(PinDir()); err != nil {
		return nil, permissionHint(err)
	}
	rep, err := qosmark.Resync(q.dir, log)
	return rep, permissionHint(err)
}

func (q qosKernel) Config() (string, error) {
	s, err := qosmark.ActiveConfig(q.dir)
	return s, permissionHint(err)
}

func (q qosKernel) Stats() ([]qos.Stats, error) {
	s, err := qosmark.ReadStats(q.dir)
	return s, permissionHint(err)
}

func (q qosKernel) ResetStats() error { return permissionHint(qosmark.ResetStats(q.dir)) }

func (q qosKernel) LogLevel() (uint32, error) {
	n, err := qosmark.LogLevel(q.dir)
	return n, permissionHint(err)
}

func (q qosKernel) SetLogLevel(level uint32) error {
	return permissionHint(qosmark.SetLogLevel(q.dir, level))
}
