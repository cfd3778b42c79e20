package packaging

import (
	"bytes"
	"debug/elf"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
)

// repo is the repository root, from this package's directory.
const repo = ".."

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// binDir builds the commands once per test run (make build, into a
// temporary BUILDDIR that every install of this run reuses).
func binDir(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "sluice-pkg-build")
		if buildErr != nil {
			return
		}
		out, err := makeCmd("build", "BUILDDIR="+buildDir).CombinedOutput()
		if err != nil {
			buildErr = err
			buildDir = string(out)
		}
	})
	if buildErr != nil {
		t.Fatalf("make build: %v\n%s", buildErr, buildDir)
	}
	return buildDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildErr == nil && buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func makeCmd(args ...string) *exec.Cmd {
	c := exec.Command("make", append([]string{"--no-print-directory", "-C", repo}, args...)...)
	c.Env = os.Environ()
	return c
}

// install runs make install (or another target) with the variables.
func install(t *testing.T, target string, vars ...string) string {
	t.Helper()
	c := makeCmd(append([]string{target, "BUILDDIR=" + binDir(t)}, vars...)...)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("make %s %v: %v\n%s", target, vars, err, out)
	}
	return string(out)
}

// files lists the regular files and symlinks under root, relative.
func files(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

var commands = []string{"ipf", "ipfstat", "ipmon", "ipnat", "ippool", "ipftest", "ipqosadmin", "netperf", "netserver", "sluice"}

// TestInstallUninstall installs into a DESTDIR, checks what went where,
// and that uninstall removes it all but a configuration file the
// administrator changed. About 20 s (most of it go build, cached after).
func TestInstallUninstall(t *testing.T) {
	dest := t.TempDir()
	install(t, "install", "DESTDIR="+dest)
	got := files(t, dest)
	want := []string{
		"etc/sluice/sluice.conf", "etc/sluice/ipf.conf", "etc/sluice/ipnat.conf", "etc/sluice/ippool.conf", "etc/sluice/ipqos.conf",
		"usr/local/libexec/sluice/ipfboot",
		"usr/local/lib/systemd/system/sluice.service", "usr/local/lib/systemd/system/sluice-ipmon.service",
		"usr/local/lib/systemd/system/sluice-ipqos.service", "usr/local/lib/systemd/system/sluice-exporter.service",
		"usr/local/lib/systemd/system/sluice-resync@.service", "usr/local/lib/udev/rules.d/90-sluice.rules",
		"usr/local/share/man/man8/ipf.8", "usr/local/share/man/man5/ipf.5", "usr/local/share/man/man8/ipfstat.8",
		"usr/local/share/man/man8/ipmon.8", "usr/local/share/man/man8/ipnat.8", "usr/local/share/man/man5/ipnat.5",
		"usr/local/share/man/man8/ippool.8", "usr/local/share/man/man5/ippool.5", "usr/local/share/man/man1/ipftest.1",
		"usr/local/share/man/man8/ipqosadmin.8", "usr/local/share/man/man5/ipqos.conf.5", "usr/local/share/man/man1/netperf.1",
		"usr/local/share/man/man8/netserver.8", "usr/local/share/man/man8/sluice.8",
		"usr/local/share/sluice/grafana/sluice.json",
		"usr/local/share/sluice/examples/ipf/host-firewall.conf", "usr/local/share/sluice/examples/ipqos/voice_video.conf",
	}
	for _, c := range commands {
		want = append(want, "usr/local/sbin/"+c)
	}
	have := map[string]bool{}
	for _, f := range got {
		have[f] = true
	}
	for _, w := range want {
		if !have[w] {
			t.Errorf("not installed: %s", w)
		}
	}
	// the install paths are substituted, for this PREFIX
	for _, f := range []string{"usr/local/libexec/sluice/ipfboot", "usr/local/lib/systemd/system/sluice.service",
		"usr/local/lib/systemd/system/sluice-ipmon.service", "usr/local/lib/systemd/system/sluice-resync@.service", "etc/sluice/sluice.conf"} {
		b, _ := os.ReadFile(filepath.Join(dest, f))
		if bytes.Contains(b, []byte("@")) && bytes.Contains(b, []byte("DIR@")) {
			t.Errorf("%s: unsubstituted variable", f)
		}
	}
	unit, _ := os.ReadFile(filepath.Join(dest, "usr/local/lib/systemd/system/sluice.service"))
	if !bytes.Contains(unit, []byte("ExecStart=/usr/local/libexec/sluice/ipfboot start")) {
		t.Errorf("sluice.service:\n%s", unit)
	}
	if fi, err := os.Stat(filepath.Join(dest, "usr/local/sbin/ipf")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("ipf mode: %v %v", fi, err)
	}
	// static, every one: the boot script runs them before anything else
	// is sure to be there, netperf's CPU figures would count a dynamic
	// loader, and the .deb depends on nothing
	sbin, err := os.ReadDir(filepath.Join(dest, "usr/local/sbin"))
	if err != nil || len(sbin) < 10 {
		t.Fatalf("installed commands: %v %v", sbin, err)
	}
	for _, e := range sbin {
		c := e.Name()
		f, err := elf.Open(filepath.Join(dest, "usr/local/sbin", c))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s is dynamically linked (make builds with CGO_ENABLED=0)", c)
			}
		}
		f.Close()
	}
	// man finds the installed pages in that man path
	if _, err := exec.LookPath("man"); err == nil {
		out, err := exec.Command("man", "-M", filepath.Join(dest, "usr/local/share/man"), "-w", "8", "ipf").Output()
		if err != nil || strings.TrimSpace(string(out)) != filepath.Join(dest, "usr/local/share/man/man8/ipf.8") {
			t.Errorf("man -w ipf: %q %v", out, err)
		}
	}

	// a changed configuration survives a second install and the uninstall
	conf := filepath.Join(dest, "etc/sluice/ipf.conf")
	if err := os.WriteFile(conf, []byte("block in all\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := install(t, "install", "DESTDIR="+dest); !strings.Contains(out, "keeping "+conf) {
		t.Errorf("second install did not say it kept %s:\n%s", conf, out)
	}
	if b, _ := os.ReadFile(conf); string(b) != "block in all\n" {
		t.Errorf("install overwrote %s", conf)
	}
	out := install(t, "uninstall", "DESTDIR="+dest)
	if left := files(t, dest); len(left) != 1 || left[0] != "etc/sluice/ipf.conf" {
		t.Errorf("after uninstall: %v, want only the changed etc/sluice/ipf.conf\n%s", left, out)
	}
	if !strings.Contains(out, "keeping "+conf) {
		t.Errorf("uninstall did not say it kept %s:\n%s", conf, out)
	}
	os.Remove(conf)
	install(t, "uninstall", "DESTDIR="+dest)
	if left := files(t, dest); len(left) != 0 {
		t.Errorf("after the second uninstall: %v", left)
	}
	// nothing named sluice is left, not even an empty directory
	filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), "sluice") {
			t.Errorf("left behind: %s", p)
		}
		return nil
	})
}

// TestUnitsVerify installs with a real PREFIX in a temporary directory
// (so the units' commands exist) and runs systemd-analyze verify on the
// units, with the installed man pages on MANPATH for Documentation=.
func TestUnitsVerify(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		skipOrFail(t, "systemd-analyze not installed (apt-get install systemd): %v", err)
	}
	dir := t.TempDir()
	install(t, "install", "PREFIX="+dir+"/usr", "SYSCONFDIR="+dir+"/etc")
	// (a template, sluice-resync@.service, is verified as an instance)
	units, _ := filepath.Glob(filepath.Join(dir, "usr/lib/systemd/system/*.service"))
	if len(units) != 5 {
		t.Fatalf("units: %v", units)
	}
	c := exec.Command(sa, append([]string{"verify"}, units...)...)
	c.Env = append(os.Environ(), "MANPATH="+dir+"/usr/share/man:", "SYSTEMD_LOG_LEVEL=notice")
	out, err := c.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// and it does catch a broken unit
	bad := filepath.Join(dir, "bad.service")
	b, _ := os.ReadFile(units[0])
	os.WriteFile(bad, bytes.Replace(b, []byte("ExecStart="), []byte("ExecStart=nope"), 1), 0o644)
	if out, err := exec.Command(sa, "verify", bad).CombinedOutput(); err == nil {
		t.Errorf("a broken unit verified:\n%s", out)
	}
}

// TestUdevRule checks the installed udev rule: every line is well formed
// (KEY{ATTR}=="match" or KEY+="value", comma-separated, with keys udev
// knows), it fires on network interfaces that are added, not on the
// loopback, and the unit it pulls in is installed beside it and runs
// ipfboot resync (what the boot test runs after adding an interface).
func TestUdevRule(t *testing.T) {
	dir := t.TempDir()
	install(t, "install", "PREFIX="+dir+"/usr", "SYSCONFDIR="+dir+"/etc")
	b, err := os.ReadFile(filepath.Join(dir, "usr/lib/udev/rules.d/90-sluice.rules"))
	if err != nil {
		t.Fatal(err)
	}
	pair := regexp.MustCompile(`^\s*([A-Z_]+)(\{[A-Za-z_]+\})?\s*(==|!=|\+=|=|:=|-=)\s*"([^"]*)"\s*$`)
	known := map[string]bool{"ACTION": true, "SUBSYSTEM": true, "KERNEL": true, "TAG": true, "ENV": true}
	var rules []map[string]string
	for i, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		r := map[string]string{}
		for _, f := range strings.Split(l, ",") {
			m := pair.FindStringSubmatch(f)
			if m == nil || !known[m[1]] {
				t.Errorf("line %d: %q is not KEY op \"value\" with a key this test knows", i+1, f)
				continue
			}
			r[m[1]+m[2]+m[3]] = m[4]
		}
		rules = append(rules, r)
	}
	if len(rules) != 1 {
		t.Fatalf("%d rules, want 1:\n%s", len(rules), b)
	}
	r := rules[0]
	for k, want := range map[string]string{"ACTION==": "add", "SUBSYSTEM==": "net", "KERNEL!=": "lo", "TAG+=": "systemd",
		"ENV{SYSTEMD_WANTS}+=": "sluice-resync@%k.service"} {
		if r[k] != want {
			t.Errorf("%s%q: got %q", k, want, r[k])
		}
	}
	unit, err := os.ReadFile(filepath.Join(dir, "usr/lib/systemd/system/sluice-resync@.service"))
	if err != nil {
		t.Fatalf("the rule's unit is not installed: %v", err)
	}
	if !bytes.Contains(unit, []byte("\nExecStart="+dir+"/usr/libexec/sluice/ipfboot resync\n")) || bytes.Contains(unit, []byte("[Install]")) {
		t.Errorf("sluice-resync@.service does not run ipfboot resync, or can be enabled:\n%s", unit)
	}
}
