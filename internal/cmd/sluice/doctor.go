package sluice

// sluice doctor: checks what the commands need from this host and says
// plainly what is missing and what to do about it.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"

	"sluice/internal/bpf"
	"sluice/internal/ipfctl"
)

// Severity of a doctor finding.
type Severity int

// Severities, in increasing order.
const (
	SevInfo Severity = iota // for the record, nothing to do
	SevOK                   // a prerequisite that is met
	SevWarn                 // works, but not as well, or a trap to know about
	SevFail                 // the commands cannot work until this is fixed
)

func (s Severity) String() string {
	switch s {
	case SevOK:
		return "ok"
	case SevWarn:
		return "warn"
	case SevFail:
		return "FAIL"
	}
	return "info"
}

// Finding is one line of the doctor's report.
type Finding struct {
	Check string
	Sev   Severity
	Msg   string
}

// doctorEnv is what the checks look at, replaceable in tests.
type doctorEnv struct {
	euid       func() int
	release    func() (string, error)            // uname -r
	fsType     func(path string) (int64, error)  // statfs f_type
	readlink   func(path string) (string, error) // /proc/*/ns/mnt
	stat       func(path string) error           // BTF, pins (os.Stat's error)
	lookPath   func(name string) (string, error) // clang, the commands
	probeBPF   func() error                      // SCHED_CLS programs and ring buffers
	mountInfo1 func() (string, error)            // /proc/1/mountinfo
	pinDir     string                            // the filter's pin directory
	developer  bool                              // clang is required
	commands   []string                          // expected on the PATH
	sysctl     func(name string) (string, error) // /proc/sys values
	memModel   func() error                      // the CPU's memory model (bpf.CheckMemoryModel)
	// where the pinned filter runs (root only): what the "datapath"
	// check says once it knows one is pinned
	datapathPlace func(pin string) (Severity, string)
	// where NAT (pinned in NATPinDir of pinDir) and IPQoS (state in
	// qosDir) run (root only): what the "nat" and "ipqos" checks say
	// once they know one is pinned
	natPlace func(pin string) (Severity, string)
	qosPlace func(dir string) (Severity, string)
	qosDir   string // IPQoS's state directory ("" = the default)
}

// tcxVersion is the first kernel with TCX; minVersion the first with
// everything else the datapath uses (BPF ring buffer for the log).
var (
	tcxVersion = [2]int{6, 6}
	minVersion = [2]int{5, 8}
)

// installedCommands are what `make install` and the package put on the PATH.
var installedCommands = []string{"ipf", "ipfstat", "ipmon", "ipnat", "ippool", "ipftest", "ipqosadmin", "netperf", "netserver", "sluice"}

func realDoctorEnv(pinDir string, developer bool) *doctorEnv {
	return &doctorEnv{
		euid: os.Geteuid,
		release: func() (string, error) {
			var u unix.Utsname
			if err := unix.Uname(&u); err != nil {
				return "", err
			}
			return unix.ByteSliceToString(u.Release[:]), nil
		},
		fsType: func(p string) (int64, error) {
			var st unix.Statfs_t
			if err := unix.Statfs(p, &st); err != nil {
				return 0, err
			}
			return int64(st.Type), nil
		},
		readlink: os.Readlink,
		stat:     func(p string) error { _, err := os.Stat(p); return err },
		lookPath: exec.LookPath,
		probeBPF: func() error {
			if err := features.HaveProgramType(ebpf.SchedCLS); err != nil {
				return fmt.Errorf("tc (SCHED_CLS) programs: %w", err)
			}
			if err := features.HaveMapType(ebpf.RingBuf); err != nil {
				return fmt.Errorf("ring buffer maps: %w", err)
			}
			return nil
		},
		mountInfo1: func() (string, error) {
			b, err := os.ReadFile("/proc/1/mountinfo")
			return string(b), err
		},
		memModel:      bpf.CheckMemoryModel,
		datapathPlace: datapathPlace,
		natPlace:      natPlace,
		qosPlace:      qosPlace,
		qosDir:        ipfctl.QoSPinDir(),
		pinDir:        pinDir,
		developer:     developer,
		commands:      installedCommands,
		sysctl: func(name string) (string, error) {
			b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(name, ".", "/"))
			return strings.TrimSpace(string(b)), err
		},
	}
}

// parseRelease returns the major and minor numbers of a kernel release.
func parseRelease(r string) (int, int, bool) {
	f := strings.FieldsFunc(r, func(c rune) bool { return c < '0' || c > '9' })
	if len(f) < 2 {
		return 0, 0, false
	}
	maj, err1 := strconv.Atoi(f[0])
	min, err2 := strconv.Atoi(f[1])
	return maj, min, err1 == nil && err2 == nil
}

func atLeast(maj, min int, v [2]int) bool { return maj > v[0] || maj == v[0] && min >= v[1] }

// diagnose runs every check.
func diagnose(e *doctorEnv) []Finding {
	var out []Finding
	add := func(check string, sev Severity, format string, args ...any) {
		out = append(out, Finding{check, sev, fmt.Sprintf(format, args...)})
	}
	root := e.euid() == 0
	if root {
		add("root", SevOK, "running as root")
	} else {
		add("root", SevFail, "not root: loading, attaching and reading the kernel datapath need root (CAP_BPF, CAP_NET_ADMIN, CAP_SYS_ADMIN); run the commands with sudo. The offline checks (ipf -n, ipftest, ipnat -n, ippool -n, ipqosadmin -verify) work without")
	}

	if err := e.memModel(); err != nil {
		add("cpu", SevFail, "%v: the datapath's lock-free readers are not yet ordered for this CPU, so ipf and ipnat refuse to load it here; the offline tools (ipftest, ipf -n) and netperf work", err)
	} else {
		add("cpu", SevOK, "the CPU keeps loads in order (x86): the datapath's lock-free readers are correct here")
	}

	rel, err := e.release()
	maj, min, ok := parseRelease(rel)
	switch {
	case err != nil || !ok:
		add("kernel", SevWarn, "cannot read the kernel version (%q, %v)", rel, err)
	case atLeast(maj, min, tcxVersion):
		add("kernel", SevOK, "Linux %s: TCX available (6.6 or later), the filter attaches with TCX links", rel)
	case atLeast(maj, min, minVersion):
		add("kernel", SevWarn, "Linux %s has no TCX (needs 6.6): the filter attaches with tc clsact filters instead, which other tc users can replace; prefer 6.6 or later", rel)
	default:
		add("kernel", SevFail, "Linux %s is too old: the datapath needs 5.8 or later (BPF ring buffer), 6.6 or later for TCX", rel)
	}

	if root {
		if err := e.probeBPF(); err != nil {
			add("ebpf", SevFail, "the kernel cannot load the datapath's eBPF objects: %v", err)
		} else {
			add("ebpf", SevOK, "tc eBPF programs and ring buffers load")
		}
	} else {
		add("ebpf", SevInfo, "eBPF support not probed (needs root)")
	}

	pin := e.pinDir
	if pin == "" {
		pin = "/sys/fs/bpf/sluice"
	}
	parent := filepath.Dir(pin)
	t, err := e.fsType(parent)
	switch {
	case err == nil && t == unix.BPF_FS_MAGIC:
		add("bpffs", SevOK, "%s is a bpf filesystem (pins in %s)", parent, pin)
	case parent == "/sys/fs/bpf":
		add("bpffs", SevWarn, "/sys/fs/bpf is not mounted as bpffs: ipf mounts it on its first load, but mount it at boot so every process sees the same pins (fstab: `bpffs /sys/fs/bpf bpf defaults 0 0`; systemd mounts it by itself on most distributions)")
	case err != nil:
		add("bpffs", SevFail, "%s: %v: the pin directory's parent must exist on a bpf filesystem", parent, err)
	default:
		add("bpffs", SevFail, "%s is not on a bpf filesystem: $%s=%s needs a bpffs there (mount -t bpf bpf %s)", parent, ipfctl.PinDirEnv, pin, parent)
	}

	self, err1 := e.readlink("/proc/self/ns/mnt")
	init, err2 := e.readlink("/proc/1/ns/mnt")
	switch {
	case err1 != nil || err2 != nil:
		add("mountns", SevInfo, "cannot compare this process's mount namespace with init's: %v", errors.Join(err1, err2))
	case self != init:
		add("mountns", SevWarn, "this process runs in another mount namespace than init (ip netns exec, unshare -m, a container): pins made here are invisible to the boot units and to shells outside, and a bpffs mounted here goes away with the namespace; run ipf, ipfstat and ipmon from the host's mount namespace")
	default:
		mi, err := e.mountInfo1()
		if parent == "/sys/fs/bpf" && t == unix.BPF_FS_MAGIC && err == nil && !mountedBPF(mi, "/sys/fs/bpf") {
			add("mountns", SevWarn, "/sys/fs/bpf is a bpffs here but not in init's mount table: unmount it and mount it again from the host")
		} else {
			add("mountns", SevOK, "same mount namespace as init")
		}
	}

	if e.stat("/sys/kernel/btf/vmlinux") == nil {
		add("btf", SevOK, "kernel BTF present (/sys/kernel/btf/vmlinux); Sluice's programs do not need it (no CO-RE), bpftool uses it")
	} else {
		add("btf", SevInfo, "no kernel BTF (/sys/kernel/btf/vmlinux): not needed by Sluice's programs (no CO-RE); bpftool prints less")
	}

	if p, err := e.lookPath("clang"); err == nil {
		add("clang", SevOK, "clang at %s (developers: internal/bpf/regen.sh)", p)
	} else if e.developer {
		add("clang", SevFail, "clang not found: developers need clang and llvm to regenerate the eBPF objects (apt-get install clang llvm libbpf-dev)")
	} else {
		add("clang", SevInfo, "clang not found: only developers need it; the commands carry their compiled eBPF objects")
	}

	var missing, found []string
	for _, c := range e.commands {
		if p, err := e.lookPath(c); err == nil {
			found = append(found, p)
		} else {
			missing = append(missing, c)
		}
	}
	switch {
	case len(missing) == 0:
		add("path", SevOK, "the commands are on the PATH (%s)", filepath.Dir(found[0]))
	case len(found) == 0:
		add("path", SevWarn, "none of the commands is on the PATH: `make install` puts them in /usr/local/sbin (or install the .deb); see README")
	default:
		add("path", SevWarn, "not on the PATH: %s (found %s)", strings.Join(missing, ", "), strings.Join(found, ", "))
	}

	if v, err := e.sysctl("kernel.bpf_stats_enabled"); err == nil {
		if v == "1" {
			add("bpfstats", SevInfo, "kernel.bpf_stats_enabled=1: the programs' run time is counted (a few ns per packet)")
		} else {
			add("bpfstats", SevInfo, "kernel.bpf_stats_enabled=0: no in-kernel run time per packet in the metrics unless `sluice exporter --bpf-stats` runs")
		}
	}

	// The pins are root's alone (0700): a user who cannot look must not
	// be told that nothing is loaded.
	switch err := e.stat(filepath.Join(pin, "config")); {
	case err == nil && root && e.datapathPlace != nil:
		sev, msg := e.datapathPlace(pin)
		add("datapath", sev, "%s", msg)
	case err == nil:
		add("datapath", SevInfo, "a filter datapath is pinned in %s", pin)
	case errors.Is(err, fs.ErrPermission):
		add("datapath", SevInfo, "cannot tell whether a filter datapath is pinned in %s: only root may look (%v)", pin, err)
	case errors.Is(err, fs.ErrNotExist):
		add("datapath", SevInfo, "no filter datapath pinned in %s (ipf -f FILE loads one)", pin)
	default:
		add("datapath", SevWarn, "cannot tell whether a filter datapath is pinned in %s: %v", pin, err)
	}

	natPin := ipfctl.NATPinDir(pin)
	switch err := e.stat(filepath.Join(natPin, "config")); {
	case err == nil && root && e.natPlace != nil:
		sev, msg := e.natPlace(natPin)
		add("nat", sev, "%s", msg)
	case err == nil:
		add("nat", SevInfo, "a NAT datapath is pinned in %s", natPin)
	case errors.Is(err, fs.ErrPermission):
		add("nat", SevInfo, "cannot tell whether a NAT datapath is pinned in %s: only root may look (%v)", natPin, err)
	case errors.Is(err, fs.ErrNotExist):
		add("nat", SevInfo, "no NAT datapath pinned in %s (ipnat -f FILE loads one)", natPin)
	default:
		add("nat", SevWarn, "cannot tell whether a NAT datapath is pinned in %s: %v", natPin, err)
	}

	qdir := e.qosDir
	if qdir == "" {
		qdir = ipfctl.DefaultQoSPinDir
	}
	switch err := e.stat(filepath.Join(qdir, "settings")); {
	case err == nil && root && e.qosPlace != nil:
		sev, msg := e.qosPlace(qdir)
		add("ipqos", sev, "%s", msg)
	case err == nil:
		add("ipqos", SevInfo, "IPQoS is enabled (state in %s)", qdir)
	case errors.Is(err, fs.ErrPermission):
		add("ipqos", SevInfo, "cannot tell whether IPQoS is enabled in %s: only root may look (%v)", qdir, err)
	case errors.Is(err, fs.ErrNotExist):
		add("ipqos", SevInfo, "IPQoS not enabled (no state in %s; ipqosadmin -load -f FILE loads a configuration)", qdir)
	default:
		add("ipqos", SevWarn, "cannot tell whether IPQoS is enabled in %s: %v", qdir, err)
	}
	return out
}

// datapathPlace says where the filter pinned in pin runs, seen from this
// network namespace. A datapath whose interfaces went away filters
// nothing while its rules stay pinned (ipf -E in a namespace deleted
// since, or every interface it was on removed): nothing else says so.
func datapathPlace(pin string) (Severity, string) {
	d, err := bpf.OpenPinned(pin)
	if err != nil {
		return SevWarn, fmt.Sprintf("a filter datapath is pinned in %s but cannot be read: %v", pin, err)
	}
	defer d.Close()
	if err := d.CheckNetNS(); err != nil {
		if errors.Is(err, bpf.ErrOtherNetNS) {
			return SevWarn, fmt.Sprintf("the filter datapath pinned in %s filters another network namespace than this one: "+
				"run the commands there (nsenter --net=/run/netns/NAME …); if that namespace was deleted, its rules filter "+
				"nothing and ipf -D removes them", pin)
		}
		return SevWarn, fmt.Sprintf("a filter datapath is pinned in %s; whose network namespace it filters cannot be told: %v", pin, err)
	}
	hooked, err := d.Hooked()
	if err != nil {
		return SevWarn, fmt.Sprintf("a filter datapath is pinned in %s; the interfaces it runs on cannot be read: %v", pin, err)
	}
	if len(hooked) == 0 {
		return SevWarn, fmt.Sprintf("a filter datapath is pinned in %s but runs on no interface of this network namespace "+
			"(the interfaces it was on went away, or its rules name none that exist): ipf -y attaches it where it belongs, "+
			"ipf -D removes it", pin)
	}
	var names []string
	for idx := range hooked {
		name := fmt.Sprintf("if%d", idx)
		if ifc, err := net.InterfaceByIndex(idx); err == nil {
			name = ifc.Name
		}
		names = append(names, name)
	}
	sort.Strings(names)
	ahead, err := d.Ahead()
	if err != nil {
		return SevWarn, fmt.Sprintf("a filter datapath is pinned in %s and runs on %s; the programs before it cannot be read: %v",
			pin, strings.Join(names, " "), err)
	}
	if len(ahead) > 0 {
		return SevWarn, fmt.Sprintf("a filter datapath is pinned in %s and runs on %s, but other programs run before it (%s): "+
			"the packets they pass or redirect are not filtered; detach them, or attach them after the filter",
			pin, strings.Join(names, " "), aheadNames(ahead))
	}
	return SevInfo, fmt.Sprintf("a filter datapath is pinned in %s and runs on %s", pin, strings.Join(names, " "))
}

// aheadNames lists programs ahead of the filter as the commands name them.
func aheadNames(ahead []bpf.AheadProg) string {
	var names []string
	for _, a := range ipfctl.AheadPrograms(ahead) {
		names = append(names, a.String())
	}
	return strings.Join(names, "; ")
}

// mountedBPF reports whether a mountinfo text has a bpf mount at dir.
func mountedBPF(mountinfo, dir string) bool {
	for _, l := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(l)
		// id parent maj:min root mountpoint opts [optional...] - fstype src superopts
		if len(f) < 7 || f[4] != dir {
			continue
		}
		for i := 5; i < len(f)-1; i++ {
			if f[i] == "-" {
				if f[i+1] == "bpf" {
					return true
				}
				break
			}
		}
	}
	return false
}

const doctorUsage = "usage: sluice doctor [--pindir DIR] [--developer]\n"

func cmdDoctor(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sluice doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, doctorUsage)
		fs.PrintDefaults()
	}
	pindir := fs.String("pindir", ipfctl.PinDir(), "the filter's pin directory (default $SLUICE_BPF_DIR or /sys/fs/bpf/sluice)")
	dev := fs.Bool("developer", false, "also require what developers need (clang)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sluice doctor: unexpected argument %q\n%s", fs.Arg(0), doctorUsage)
		return 2
	}
	return printFindings(diagnose(realDoctorEnv(*pindir, *dev)), stdout)
}

// printFindings prints the findings and returns the exit status: 1 when any
// check failed.
func printFindings(fs []Finding, w io.Writer) int {
	fails, warns := 0, 0
	for _, f := range fs {
		fmt.Fprintf(w, "%-5s %-9s %s\n", f.Sev, f.Check, f.Msg)
		switch f.Sev {
		case SevFail:
			fails++
		case SevWarn:
			warns++
		}
	}
	switch {
	case fails > 0:
		fmt.Fprintf(w, "%d problem(s) to fix, %d warning(s)\n", fails, warns)
		return 1
	case warns > 0:
		fmt.Fprintf(w, "ready, with %d warning(s)\n", warns)
	default:
		fmt.Fprintln(w, "ready")
	}
	return 0
}
