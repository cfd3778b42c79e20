package datapath

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"sluice/internal/bench/config"
	"sluice/internal/bench/topo"
	ipnatcmd "sluice/internal/cmd/ipnat"
	"sluice/internal/ipfctl"
)

// envMu serialises the commands run with SLUICE_BPF_DIR set: the
// variable is process-wide.
var envMu sync.Mutex

// ipnat runs the ipnat command in-process, inside the host's namespace,
// with SLUICE_BPF_DIR pointing at dir; it returns its stderr on failure.
func ipnat(h *topo.Host, dir string, args ...string) error {
	envMu.Lock()
	defer envMu.Unlock()
	old, had := os.LookupEnv(ipfctl.PinDirEnv)
	if err := os.Setenv(ipfctl.PinDirEnv, dir); err != nil {
		return err
	}
	defer func() {
		if had {
			os.Setenv(ipfctl.PinDirEnv, old)
		} else {
			os.Unsetenv(ipfctl.PinDirEnv)
		}
	}()
	var stdout, stderr bytes.Buffer
	rc := 0
	err := h.Do(func() error {
		rc = ipnatcmd.Main(args, strings.NewReader(""), &stdout, &stderr)
		return nil
	})
	if err != nil {
		return err
	}
	if rc != 0 {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = fmt.Sprintf("exit status %d", rc)
		}
		return fmt.Errorf("ipnat %s: %s", strings.Join(args, " "), msg)
	}
	return nil
}

// unsupported reports whether ipnat's answer means this build or kernel
// has no kernel NAT (as opposed to a bad rule set or a failed load).
func unsupported(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{"no kernel nat", "not supported", "unsupported", "not implemented"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// LoadNAT returns the Applier of a sluice-nat-* configuration: Apply
// writes the ipnat.conf to the private bpffs's directory and runs
// `ipnat -f FILE` (internal/cmd/ipnat, in-process) inside the gateway's
// namespace with SLUICE_BPF_DIR set to a pin directory of its own, so it
// loads Sluice's kernel NAT there and nowhere else. Where ipnat answers
// that there is no kernel NAT, Apply fails with an error wrapping
// errors.ErrUnsupported and the run records the configuration as
// skipped with that message.
func LoadNAT(conf string) (config.Applier, error) {
	sweep()
	return &natApplier{conf: conf}, nil
}

type natApplier struct {
	conf string
	host *topo.Host
	fs   *privateFS
	pin  string
}

func (a *natApplier) Apply(ctx context.Context, h *topo.Host) error {
	if a.fs != nil {
		return errors.New("datapath: NAT applied twice")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	fs, err := mountPrivate()
	if err != nil {
		return err
	}
	pin := filepath.Join(fs.dir, "nat-"+hostID(h))
	file := fs.dir + ".conf"
	if err := os.WriteFile(file, []byte(a.conf), 0o600); err != nil {
		return errors.Join(fmt.Errorf("datapath: %w", err), fs.unmount())
	}
	defer os.Remove(file)
	if err := ipnat(h, pin, "-f", file); err != nil {
		err = errors.Join(err, fs.unmount())
		if unsupported(err.Error()) {
			return fmt.Errorf("sluice's kernel NAT is not available in this build: %w (%w)", err, errors.ErrUnsupported)
		}
		return err
	}
	a.host, a.fs, a.pin = h, fs, pin
	return nil
}

func (a *natApplier) Remove() error {
	if a.fs == nil {
		return nil
	}
	// Rules and sessions go first; unmounting the private bpffs then
	// drops the pins that hold the programs and their links.
	err := ipnat(a.host, a.pin, "-C", "-F")
	err = errors.Join(err, a.fs.unmount())
	a.fs = nil
	return err
}

// LoadGWNAT is the Applier of the gateway configurations with the filter
// and NAT together (sluice-gw-stateful-nat-map, -nat-two): the filter is
// loaded as LoadIPF's, then `ipnat -f` runs (in-process) with
// SLUICE_BPF_DIR set to the filter's pin directory, so NAT is pinned
// beside it as the commands have it (NATPinDir) and ipnat puts NAT's
// established path inside the filter's programs where it can (natw).
// Without inline, `nat_inline=0` is set first (ipf -T): two programs on
// each hook, NAT's and the filter's.
func LoadGWNAT(filter, conf string, inline bool) (config.Applier, error) {
	f, err := LoadIPF(filter)
	if err != nil {
		return nil, err
	}
	return &gwNATApplier{ipf: f.(*ipfApplier), conf: conf, inline: inline}, nil
}

type gwNATApplier struct {
	ipf    *ipfApplier
	conf   string
	inline bool
	pin    string // the filter's pin directory, once NAT is loaded
}

func (a *gwNATApplier) Apply(ctx context.Context, h *topo.Host) error {
	if err := a.ipf.Apply(ctx, h); err != nil {
		return err
	}
	pin := a.ipf.dp.Dir()
	if !a.inline {
		if err := a.ipf.dp.SetTunable("nat_inline", 0); err != nil {
			return errors.Join(err, a.ipf.Remove())
		}
	}
	file := a.ipf.fs.dir + ".nat.conf" // beside the bpffs, not in it
	conf := strings.NewReplacer("@IN@", h.Inside, "@OUT@", h.Link).Replace(a.conf)
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		return errors.Join(err, a.ipf.Remove())
	}
	defer os.Remove(file)
	if err := ipnat(h, pin, "-f", file); err != nil {
		return errors.Join(err, a.Remove())
	}
	a.pin = pin
	if a.inline {
		// the comparison is only worth its name when the path is in
		var on bool
		_ = h.Do(func() error {
			on, _, _ = a.ipf.dp.NATInline()
			return nil
		})
		if !on {
			return errors.Join(errors.New("datapath: ipnat left NAT's path out of the filter's programs"), a.Remove())
		}
	}
	return nil
}

func (a *gwNATApplier) Remove() error {
	var errs []error
	if a.pin != "" {
		// NAT's path leaves the filter's programs before NAT goes (as
		// ipf -D has it), then the filter and its bpffs
		errs = append(errs, a.ipf.host.Do(func() error { return ipfctl.Remove(a.pin) }))
		a.pin = ""
	}
	errs = append(errs, a.ipf.Remove())
	return errors.Join(errs...)
}
