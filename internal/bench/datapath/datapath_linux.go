package datapath

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"sluice/internal/bench/config"
	"sluice/internal/bench/topo"
	"sluice/internal/bpf"
	"sluice/internal/bpf/qosmark"
	"sluice/internal/qos"
	"sluice/internal/rules/ipf"
)

// Datapaths returns the IPFilter and IPQoS loaders for config.Builtin.
func Datapaths() config.Datapaths {
	return config.Datapaths{IPF: LoadIPF, QoS: LoadQoS, Floor: NewFloor, FloorKind: NewFloorKind, NAT: LoadNAT, IPFStage: LoadIPFStage, IPFRunCut: LoadIPFRunCut, GWNAT: LoadGWNAT, Stats: Stats}
}

// StateMax is the IPFilter state_max the bench sets. IPFilter's default,
// 4013, is far below what TCP_CRR opens: thousands of connections a
// second, whose entries stay in TIME_WAIT for two minutes, so new
// connections would be refused (blocked, as IPFilter does when it cannot
// add state) within a second. 65536 is the size of the datapath's state
// table; each apply starts with an empty one.
const StateMax = 65536

var sweepOnce sync.Once

// sweep removes, once per process, the bpffs mounts of benches that died
// before their Remove ran.
func sweep() { sweepOnce.Do(func() { _, _ = SweepMounts() }) }

// LoadIPF parses and compiles an ipf.conf rule set for the kernel filter;
// the Applier loads it into a fresh datapath and attaches it to the SUT's
// link in both directions.
func LoadIPF(rules string) (config.Applier, error) {
	rs, err := parseIPF(rules)
	if err != nil {
		return nil, err
	}
	// Compiled here to report what the kernel datapath cannot do as the
	// configuration's skip reason; Apply compiles again inside the SUT's
	// namespace when rules name interfaces, whose indexes live there.
	im, err := bpf.Compile(rs, bpf.CompileOptions{Text: ipf.FormatRule})
	if err != nil {
		return nil, fmt.Errorf("compiling the rule set: %w", err)
	}
	sweep()
	return &ipfApplier{rules: rs, im: im}, nil
}

// LoadIPFStage is LoadIPF with the programs cut after the filter's STAGE
// stage (bpf.Datapath.BenchStopAt): a live bisect.
func LoadIPFStage(rules string, stage uint32) (config.Applier, error) {
	a, err := LoadIPF(rules)
	if err != nil {
		return nil, err
	}
	a.(*ipfApplier).stage = stage
	return a, nil
}

// LoadIPFRunCut is LoadIPF with the constant lists' run probe cut at
// point cut (bpf.Datapath.BenchRunCut): a live bisect.
func LoadIPFRunCut(rules string, cut uint32) (config.Applier, error) {
	a, err := LoadIPF(rules)
	if err != nil {
		return nil, err
	}
	a.(*ipfApplier).runcut = cut
	return a, nil
}

type ipfApplier struct {
	rules  []*ipf.Rule
	im     *bpf.Image
	stage  uint32 // LoadIPFStage's cut, 0 none
	runcut uint32 // LoadIPFRunCut's, 0 none

	host *topo.Host
	fs   *privateFS
	dp   *bpf.Datapath
}

func (a *ipfApplier) Apply(ctx context.Context, h *topo.Host) error {
	if a.dp != nil {
		return errors.New("datapath: IPFilter applied twice")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	fs, err := mountPrivate()
	if err != nil {
		return err
	}
	pin := filepath.Join(fs.dir, "ipf-"+hostID(h))
	err = h.Do(func() error {
		im := a.im
		if len(im.Interfaces()) > 0 {
			var err error
			if im, err = bpf.Compile(a.rules, bpf.CompileOptions{Text: ipf.FormatRule}); err != nil {
				return fmt.Errorf("compiling the rule set in the SUT's namespace: %w", err)
			}
		}
		dp, err := bpf.Load(bpf.Options{PinDir: pin})
		if err != nil {
			return err
		}
		if a.stage != 0 {
			if err := dp.BenchStopAt(a.stage); err != nil {
				return errors.Join(err, dp.Remove())
			}
		}
		if a.runcut != 0 {
			if err := dp.BenchRunCut(a.runcut); err != nil {
				return errors.Join(err, dp.Remove())
			}
		}
		if err := dp.SetStateMax(StateMax); err != nil {
			return errors.Join(err, dp.Remove())
		}
		// Rules first, so the first packet the hook sees meets them.
		if err := dp.LoadRules(im, bpf.Active); err != nil {
			return errors.Join(err, dp.Remove())
		}
		if err := dp.Attach([]string{h.Link}); err != nil {
			return errors.Join(err, dp.Remove())
		}
		a.dp = dp
		return nil
	})
	if err != nil {
		return errors.Join(err, fs.unmount())
	}
	a.host, a.fs = h, fs
	// an Applier is applied once: a million rules' parse and image (over
	// a gigabyte) need not stay in memory while the tests run
	a.rules, a.im = nil, nil
	return nil
}

func (a *ipfApplier) Remove() error {
	if a.dp == nil {
		return nil
	}
	dp := a.dp
	a.dp = nil
	// Detach looks for tc fallback filters among the links of the
	// calling thread's namespace: the SUT's.
	err := a.host.Do(dp.Remove)
	return errors.Join(err, a.fs.unmount())
}

// LoadQoS parses and compiles an ipqos.conf configuration; the Applier
// loads it with the IPQoS loader, which attaches the marker to the
// configuration's adapters (the SUT's link) on egress.
func LoadQoS(conf string) (config.Applier, error) {
	rs, err := parseQoS(conf)
	if err != nil {
		return nil, err
	}
	sweep()
	return &qosApplier{rs: rs}, nil
}

type qosApplier struct {
	rs *qos.Ruleset

	host *topo.Host
	fs   *privateFS
	pin  string
}

func (a *qosApplier) Apply(ctx context.Context, h *topo.Host) error {
	if a.pin != "" {
		return errors.New("datapath: IPQoS applied twice")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	fs, err := mountPrivate()
	if err != nil {
		return err
	}
	pin := filepath.Join(fs.dir, "qos-"+hostID(h))
	err = h.Do(func() error {
		// Not Continue: an adapter that cannot be attached fails the
		// apply instead of measuring an unmarked link.
		if _, err := qosmark.Load(a.rs, qosmark.Options{PinDir: pin, Log: io.Discard}); err != nil {
			return errors.Join(err, qosmark.Disable(pin))
		}
		return nil
	})
	if err != nil {
		return errors.Join(err, fs.unmount())
	}
	a.host, a.fs, a.pin = h, fs, pin
	return nil
}

func (a *qosApplier) Remove() error {
	if a.pin == "" {
		return nil
	}
	pin := a.pin
	a.pin = ""
	// Adapters are found by name, and the HTB classes removed, in the
	// SUT's namespace.
	err := a.host.Do(func() error { return qosmark.Disable(pin) })
	return errors.Join(err, a.fs.unmount())
}

// hostID names a test bed's pins after its SUT namespace, which is unique
// to the run; in remote mode (no namespace) after the process.
func hostID(h *topo.Host) string {
	if h.NetNS != "" {
		return filepath.Base(h.NetNS)
	}
	return fmt.Sprintf("local-%d", os.Getpid())
}
