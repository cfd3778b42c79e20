//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"errors"
	"fmt"
)

// Tunable is one of the NAT datapath's ipf -T tunables, in IPFilter's
// units (ages in ticks of 0.5 s).
type Tunable struct {
	Name          string
	Min, Max, Cur uint64
}

// natTunable maps an IPFilter tunable name to its config key. Cap is what
// the kernel can take when it is less than IPFilter's Max; Def is the
// value a key of 0 stands for (the ages, left 0 until set).
type natTunable struct {
	name          string
	key           uint32
	min, max, cap uint64
	def           uint64
}

// natTunables are the NAT tunables the kernel datapath implements:
// IPFilter 5.x's nat_table_max and the ftp proxy's, and 4.1's default NAT
// ages (5.x keeps them but has no tunable for them).
var natTunables = []natTunable{
	{"nat_table_max", cfgMax, 1, 0x7fffffff, sessEntries / 2, defaultMaxSes},
	{"ftp_forcepasv", cfgFTPForce, 0, 1, 1, 1},
	{"ftp_insecure", cfgFTPInsec, 0, 1, 1, 0},
	{"ftp_pasvonly", cfgFTPPasv, 0, 1, 1, 0},
	{"ftp_single_xfer", cfgFTPSingle, 0, 1, 1, 0},
	{"fr_defnatage", cfgDefAge, 1, 0x7fffffff, 0x7fffffff, 1200},
	{"fr_defnatipage", cfgDefIPAge, 1, 0x7fffffff, 0x7fffffff, 120},
	{"fr_defnaticmpage", cfgDefICMP, 1, 0x7fffffff, 0x7fffffff, 6},
}

// unsupportedTunables are IPFilter's other NAT and proxy tunables, which
// the kernel datapath has nothing to apply to, with why.
var unsupportedTunables = map[string]string{
	"nat_lock":          "the kernel NAT has no lock to hold: each ipnat command line is one transaction",
	"nat_table_size":    "the kernel NAT's session hash has a fixed size",
	"nat_rules_size":    "the kernel NAT's rules are not hashed",
	"rdr_rules_size":    "the kernel NAT's rules are not hashed",
	"hostmap_size":      "the kernel NAT's host map hash has a fixed size",
	"nat_maxbucket":     "the kernel NAT's session hash has no bucket limit",
	"nat_logging":       "the kernel NAT does not log sessions",
	"nat_doflush":       "the kernel NAT does not flush sessions when its table fills (nat_table_max refuses new ones)",
	"nat_table_wm_low":  "the kernel NAT does not flush sessions when its table fills (nat_table_max refuses new ones)",
	"nat_table_wm_high": "the kernel NAT does not flush sessions when its table fills (nat_table_max refuses new ones)",
	"ftp_debug":         "the kernel ftp proxy has no debug output (ipftest -N prints it)",
	"proxy_debug":       "the kernel proxies have no debug output",
	"ftp_pasvrdr":       "no ftp proxy here implements it",
	"tftp_read_only":    "only the ftp proxy runs in the kernel",
}

// UnsupportedTunable returns why name, an IPFilter NAT or proxy tunable,
// cannot be used with the kernel NAT datapath (wrapping
// errors.ErrUnsupported), or nil when it is not one of those.
func UnsupportedTunable(name string) error {
	why, ok := unsupportedTunables[name]
	if !ok {
		return nil
	}
	return fmt.Errorf("%s: not supported by the kernel NAT datapath (%s): %w", name, why, errors.ErrUnsupported)
}

// IsTunable reports whether name is one of the NAT datapath's tunables.
func IsTunable(name string) bool {
	_, ok := findNATTunable(name)
	return ok
}

func findNATTunable(name string) (natTunable, bool) {
	for _, t := range natTunables {
		if t.name == name {
			return t, true
		}
	}
	return natTunable{}, false
}

// DefaultTunables lists the NAT tunables with their defaults (what a
// datapath not yet loaded will have).
func DefaultTunables() []Tunable {
	out := make([]Tunable, 0, len(natTunables))
	for _, t := range natTunables {
		out = append(out, Tunable{Name: t.name, Min: t.min, Max: t.max, Cur: t.def})
	}
	return out
}

// TunableList lists the NAT tunables with their current values.
func (d *Datapath) TunableList() []Tunable {
	out := make([]Tunable, 0, len(natTunables))
	for _, t := range natTunables {
		v := d.cfg(t.key)
		if v == 0 && t.min > 0 {
			v = t.def
		}
		out = append(out, Tunable{Name: t.name, Min: t.min, Max: t.max, Cur: v})
	}
	return out
}

// CheckTunable checks that name can be set to v: a NAT tunable, within
// IPFilter's range and what the kernel can take.
func CheckTunable(name string, v uint64) error {
	if err := UnsupportedTunable(name); err != nil {
		return err
	}
	t, ok := findNATTunable(name)
	if !ok {
		return fmt.Errorf("unknown NAT tunable %q", name)
	}
	if v < t.min || v > t.max {
		return fmt.Errorf("%s: %d is outside %d..%d", name, v, t.min, t.max)
	}
	if v > t.cap {
		return fmt.Errorf("%s: %d: the kernel NAT takes at most %d", name, v, t.cap)
	}
	return nil
}

// SetTunable sets one NAT tunable (ipf -T name=value). nat_table_max
// and the ftp tunables apply to what comes next (new sessions, the
// proxy's next command); an age to sessions made from then on, and to
// older ones when their timer next fires.
func (d *Datapath) SetTunable(name string, v uint64) error {
	if err := CheckTunable(name, v); err != nil {
		return err
	}
	t, _ := findNATTunable(name)
	return d.setCfg(t.key, v)
}
