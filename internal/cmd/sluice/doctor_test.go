package sluice

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"sluice/internal/bpf"
)

// goodEnv is a host that has everything.
func goodEnv() *doctorEnv {
	return &doctorEnv{
		euid:     func() int { return 0 },
		release:  func() (string, error) { return "6.18.44-fc-v1045", nil },
		fsType:   func(string) (int64, error) { return unix.BPF_FS_MAGIC, nil },
		readlink: func(string) (string, error) { return "mnt:[4026531832]", nil },
		stat:     func(string) error { return nil },
		lookPath: func(n string) (string, error) { return "/usr/local/sbin/" + n, nil },
		probeBPF: func() error { return nil },
		mountInfo1: func() (string, error) {
			return "30 23 0:27 / /sys/fs/bpf rw,relatime shared:8 - bpf bpf rw,mode=700\n", nil
		},
		commands: installedCommands,
		sysctl:   func(string) (string, error) { return "0", nil },
		memModel: func() error { return nil },
	}
}

func findingOf(fs []Finding, check string) Finding {
	for _, f := range fs {
		if f.Check == check {
			return f
		}
	}
	return Finding{Check: check, Sev: -1}
}

func TestDoctorAllGood(t *testing.T) {
	fs := diagnose(goodEnv())
	for _, f := range fs {
		if f.Sev == SevFail || f.Sev == SevWarn {
			t.Errorf("%s: %s %s", f.Check, f.Sev, f.Msg)
		}
	}
	var out bytes.Buffer
	if rc := printFindings(fs, &out); rc != 0 || !strings.HasSuffix(out.String(), "ready\n") {
		t.Errorf("exit %d:\n%s", rc, out.String())
	}
}

// TestDoctorFindings breaks one thing at a time and checks the severity
// and that the message says what to do.
func TestDoctorFindings(t *testing.T) {
	for _, c := range []struct {
		name  string
		mod   func(*doctorEnv)
		check string
		sev   Severity
		says  string
	}{
		{"not root", func(e *doctorEnv) { e.euid = func() int { return 1000 } }, "root", SevFail, "sudo"},
		{"not root: no probe", func(e *doctorEnv) {
			e.euid = func() int { return 1000 }
			e.probeBPF = func() error { t.Error("probed as non-root"); return nil }
		}, "ebpf", SevInfo, "needs root"},
		{"weakly ordered cpu", func(e *doctorEnv) {
			e.memModel = func() error { return fmt.Errorf("GOARCH=arm64: %w", bpf.ErrWeakMemory) }
		}, "cpu", SevFail, "refuse to load"},
		{"old kernel, no TCX", func(e *doctorEnv) { e.release = func() (string, error) { return "6.1.0-18-amd64", nil } }, "kernel", SevWarn, "clsact"},
		{"5.15 no TCX", func(e *doctorEnv) { e.release = func() (string, error) { return "5.15.0", nil } }, "kernel", SevWarn, "needs 6.6"},
		{"too old", func(e *doctorEnv) { e.release = func() (string, error) { return "4.19.0", nil } }, "kernel", SevFail, "5.8 or later"},
		{"6.6 has TCX", func(e *doctorEnv) { e.release = func() (string, error) { return "6.6.0", nil } }, "kernel", SevOK, "TCX available"},
		{"garbled release", func(e *doctorEnv) { e.release = func() (string, error) { return "linux", nil } }, "kernel", SevWarn, "cannot read"},
		{"no ebpf", func(e *doctorEnv) { e.probeBPF = func() error { return errors.New("operation not permitted") } }, "ebpf", SevFail, "operation not permitted"},
		{"bpffs not mounted", func(e *doctorEnv) { e.fsType = func(string) (int64, error) { return 0x01021994, nil } }, "bpffs", SevWarn, "fstab"},
		{"custom pin dir not bpffs", func(e *doctorEnv) {
			e.pinDir = "/tmp/x/sluice"
			e.fsType = func(string) (int64, error) { return 0x01021994, nil }
		}, "bpffs", SevFail, "mount -t bpf bpf /tmp/x"},
		{"custom pin dir missing", func(e *doctorEnv) {
			e.pinDir = "/nope/sluice"
			e.fsType = func(string) (int64, error) { return 0, os.ErrNotExist }
		}, "bpffs", SevFail, "must exist"},
		{"other mount namespace", func(e *doctorEnv) {
			e.readlink = func(p string) (string, error) {
				if strings.Contains(p, "self") {
					return "mnt:[1]", nil
				}
				return "mnt:[2]", nil
			}
		}, "mountns", SevWarn, "ip netns exec"},
		{"bpffs only in this namespace's view", func(e *doctorEnv) {
			e.mountInfo1 = func() (string, error) { return "22 1 0:21 / /sys rw - sysfs sysfs rw\n", nil }
		}, "mountns", SevWarn, "init's mount table"},
		// a user other than root cannot look into the 0700 pins: the
		// doctor said "no filter datapath pinned" with a filter loaded
		{"pins not readable", func(e *doctorEnv) {
			e.euid = func() int { return 1000 }
			e.stat = func(p string) error {
				if strings.HasSuffix(p, "/config") {
					return &fs.PathError{Op: "stat", Path: p, Err: unix.EACCES}
				}
				return nil
			}
		}, "datapath", SevInfo, "only root may look"},
		// where the pinned filter runs is asked as root only
		{"pinned, another namespace's", func(e *doctorEnv) {
			e.datapathPlace = func(pin string) (Severity, string) { return SevWarn, pin + " filters another network namespace" }
		}, "datapath", SevWarn, "/sys/fs/bpf/sluice filters another"},
		{"pinned, not root", func(e *doctorEnv) {
			e.euid = func() int { return 1000 }
			e.datapathPlace = func(string) (Severity, string) { t.Error("datapathPlace called without root"); return SevWarn, "" }
		}, "datapath", SevInfo, "a filter datapath is pinned in /sys/fs/bpf/sluice"},
		{"nothing pinned", func(e *doctorEnv) {
			e.stat = func(p string) error {
				if strings.HasSuffix(p, "/config") {
					return &fs.PathError{Op: "stat", Path: p, Err: unix.ENOENT}
				}
				return nil
			}
		}, "datapath", SevInfo, "no filter datapath pinned"},
		// NAT's and IPQoS's pins, as the filter's: where they run is
		// asked as root only
		{"nat pinned, another namespace's", func(e *doctorEnv) {
			e.natPlace = func(pin string) (Severity, string) { return SevWarn, pin + " works in another network namespace" }
		}, "nat", SevWarn, "/sys/fs/bpf/sluice-nat works in another"},
		{"nat pinned, not root", func(e *doctorEnv) {
			e.euid = func() int { return 1000 }
			e.natPlace = func(string) (Severity, string) { t.Error("natPlace called without root"); return SevWarn, "" }
		}, "nat", SevInfo, "a NAT datapath is pinned in /sys/fs/bpf/sluice-nat"},
		{"nat pins not readable", func(e *doctorEnv) {
			e.euid = func() int { return 1000 }
			e.stat = func(p string) error {
				if strings.HasSuffix(p, "-nat/config") {
					return &fs.PathError{Op: "stat", Path: p, Err: unix.EACCES}
				}
				return nil
			}
		}, "nat", SevInfo, "only root may look"},
		{"no nat", func(e *doctorEnv) {
			e.pinDir = "/sys/fs/bpf/fw"
			e.stat = func(p string) error {
				if p == "/sys/fs/bpf/fw-nat/config" {
					return &fs.PathError{Op: "stat", Path: p, Err: unix.ENOENT}
				}
				return nil
			}
		}, "nat", SevInfo, "no NAT datapath pinned in /sys/fs/bpf/fw-nat"},
		{"ipqos, another namespace's", func(e *doctorEnv) {
			e.qosDir = "/sys/fs/bpf/q"
			e.qosPlace = func(dir string) (Severity, string) { return SevWarn, dir + " marks in another network namespace" }
		}, "ipqos", SevWarn, "/sys/fs/bpf/q marks in another"},
		{"ipqos, not root", func(e *doctorEnv) {
			e.euid = func() int { return 1000 }
			e.qosPlace = func(string) (Severity, string) { t.Error("qosPlace called without root"); return SevWarn, "" }
		}, "ipqos", SevInfo, "IPQoS is enabled"},
		{"ipqos not enabled", func(e *doctorEnv) {
			e.stat = func(p string) error {
				if strings.HasSuffix(p, "/settings") {
					return &fs.PathError{Op: "stat", Path: p, Err: unix.ENOENT}
				}
				return nil
			}
		}, "ipqos", SevInfo, "IPQoS not enabled"},
		{"ipqos state not readable", func(e *doctorEnv) {
			e.stat = func(p string) error {
				if strings.HasSuffix(p, "/settings") {
					return &fs.PathError{Op: "stat", Path: p, Err: unix.EIO}
				}
				return nil
			}
		}, "ipqos", SevWarn, "cannot tell whether IPQoS"},
		{"no btf", func(e *doctorEnv) {
			e.stat = func(p string) error {
				if strings.Contains(p, "btf") {
					return fs.ErrNotExist
				}
				return nil
			}
		}, "btf", SevInfo, "not needed"},
		{"no clang", func(e *doctorEnv) {
			e.lookPath = func(n string) (string, error) {
				if n == "clang" {
					return "", errors.New("not found")
				}
				return "/usr/sbin/" + n, nil
			}
		}, "clang", SevInfo, "only developers"},
		{"no clang, developer", func(e *doctorEnv) {
			e.developer = true
			e.lookPath = func(n string) (string, error) {
				if n == "clang" {
					return "", errors.New("not found")
				}
				return "/usr/sbin/" + n, nil
			}
		}, "clang", SevFail, "apt-get install clang"},
		{"nothing on PATH", func(e *doctorEnv) {
			e.lookPath = func(string) (string, error) { return "", errors.New("not found") }
		}, "path", SevWarn, "make install"},
		{"some on PATH", func(e *doctorEnv) {
			e.lookPath = func(n string) (string, error) {
				if n == "ipqosadmin" {
					return "", errors.New("not found")
				}
				return "/usr/sbin/" + n, nil
			}
		}, "path", SevWarn, "not on the PATH: ipqosadmin"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := goodEnv()
			c.mod(e)
			fs := diagnose(e)
			f := findingOf(fs, c.check)
			if f.Sev != c.sev || !strings.Contains(f.Msg, c.says) {
				t.Errorf("%s: got %s %q, want %s containing %q", c.check, f.Sev, f.Msg, c.sev, c.says)
			}
			var out bytes.Buffer
			rc := printFindings(fs, &out)
			fail := false
			for _, f := range fs {
				fail = fail || f.Sev == SevFail
			}
			if (rc != 0) != fail {
				t.Errorf("exit %d with fail=%v:\n%s", rc, fail, out.String())
			}
		})
	}
}

func TestMountedBPF(t *testing.T) {
	mi := "22 1 0:21 / /sys rw,nosuid - sysfs sysfs rw\n" +
		"30 22 0:27 / /sys/fs/bpf rw,relatime shared:8 - bpf bpf rw,mode=700\n" +
		"31 22 0:28 / /sys/fs/cgroup rw shared:9 master:1 - cgroup2 cgroup2 rw\n"
	if !mountedBPF(mi, "/sys/fs/bpf") {
		t.Error("bpf mount not found")
	}
	if mountedBPF(mi, "/sys/fs/cgroup") || mountedBPF(mi, "/sys") || mountedBPF("", "/sys/fs/bpf") || mountedBPF("garbage - -", "/sys/fs/bpf") {
		t.Error("false positive")
	}
}

// TestDoctorHere runs the real checks on this machine: as root (CI) the
// root, kernel and eBPF checks pass, since the rest of the tests need
// them too.
func TestDoctorHere(t *testing.T) {
	var out, errb bytes.Buffer
	rc := cmdDoctor(nil, &out, &errb)
	t.Logf("exit %d\n%s%s", rc, out.String(), errb.String())
	if os.Geteuid() != 0 {
		if rc != 1 || !strings.Contains(out.String(), "FAIL  root") {
			t.Errorf("not root: exit %d", rc)
		}
		return
	}
	for _, want := range []string{"ok    root", "ok    ebpf"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q", want)
		}
	}
	if rc := cmdDoctor([]string{"stray"}, &out, &errb); rc != 2 {
		t.Errorf("stray argument: exit %d", rc)
	}
}
