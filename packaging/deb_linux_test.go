package packaging

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"sluice/internal/bench/topo"
	"sluice/internal/testutil"
	"sluice/internal/testutil/promtest"
)

// snapshotRoots are where a package could leave files behind. /run is
// left out but for /run/sluice (other tests make network namespaces
// there); apt's and dpkg's own logs and state are left out too.
var snapshotRoots = []string{"/etc", "/usr/sbin", "/usr/bin", "/usr/libexec", "/usr/share/man", "/usr/share/doc",
	"/usr/share/sluice", "/usr/lib/systemd", "/lib/systemd", "/var/lib/systemd", "/usr/lib/udev", "/lib/udev", runDir}

// runDir is the package's run-time directory, which its purge removes.
const runDir = "/run/sluice"

// keepDir copies dir (if it exists) aside and returns a function that puts
// the copy back where it was, with its modes and owners, replacing what is
// there then. It does nothing when dir did not exist, and is done once.
func keepDir(t *testing.T, dir string) (restore func()) {
	t.Helper()
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		return func() {}
	}
	saved := filepath.Join(t.TempDir(), "saved")
	if out, err := exec.Command("cp", "-a", dir, saved).CombinedOutput(); err != nil {
		t.Fatalf("saving %s: %v\n%s", dir, err, out)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if err := os.RemoveAll(dir); err != nil {
				t.Errorf("restoring %s: %v", dir, err)
				return
			}
			if out, err := exec.Command("cp", "-a", saved, dir).CombinedOutput(); err != nil {
				t.Errorf("restoring %s: %v\n%s", dir, err, out)
			}
		})
	}
}

// snapshot lists every path under the roots (files, directories, links).
func snapshot(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, r := range snapshotRoots {
		filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			out[p] = true
			return nil
		})
	}
	return out
}

func diff(a, b map[string]bool) []string {
	var out []string
	for p := range b {
		if !a[p] {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	c := exec.Command(name, args...)
	c.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestPrivilegedDebPackage is the whole path of an administrator on this
// machine's image: build the .deb from the repository, `apt-get install
// ./sluice_*.deb`, check the files, the man path and the units, run
// `sluice doctor`, run the installed boot script (in a test namespace with
// a private bpffs) on the installed example configuration, scrape the
// installed exporter with a real Prometheus, evaluate every query of the
// installed Grafana dashboard there, stop, then `apt-get purge` and check
// that the file list is as it was before. About 40 s after the build.
func TestPrivilegedDebPackage(t *testing.T) {
	testutil.RequireRoot(t)
	for _, tool := range []string{"dpkg", "dpkg-deb", "apt-get"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipOrFail(t, "%s not found (a Debian system is needed): %v", tool, err)
		}
	}
	if out, err := exec.Command("dpkg-query", "-W", "-f=${Status}", "sluice").Output(); err == nil && strings.Contains(string(out), "installed") {
		t.Fatalf("a sluice package is already installed on this machine (%s): this test needs a machine without it", out)
	}
	outDir := t.TempDir()
	c := exec.Command(filepath.Join(repo, "packaging/deb/build.sh"))
	c.Env = append(os.Environ(), "OUT="+outDir, "BUILDDIR="+binDir(t))
	t0 := time.Now()
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("build.sh: %v\n%s", err, out)
	}
	t.Logf("package built in %v", time.Since(t0).Round(time.Second))
	debs, _ := filepath.Glob(filepath.Join(outDir, "sluice_*.deb"))
	if len(debs) != 1 {
		t.Fatalf("built %v", debs)
	}
	info := run(t, "dpkg-deb", "--info", debs[0])
	for _, want := range []string{"Package: sluice", "conffiles"} {
		if !strings.Contains(info, want) {
			t.Errorf("dpkg-deb --info lacks %q:\n%s", want, info)
		}
	}
	// the commands are static (TestInstallUninstall): nothing to depend on
	if strings.Contains(info, "Depends:") {
		t.Errorf("the package depends on something:\n%s", info)
	}

	// A host where the commands already ran has a /run/sluice (the pool
	// store, ipfboot's pid files), which the purge removes by design: keep
	// a copy and put it back after the purge, so the host is left as it
	// was and the file lists compare equal.
	restoreRun := keepDir(t, runDir)
	before := snapshot(t)
	purged := false
	t.Cleanup(func() {
		if !purged {
			exec.Command("apt-get", "-o", "DPkg::Lock::Timeout=300", "purge", "-y", "-q", "sluice").Run()
			restoreRun()
		}
	})
	run(t, "apt-get", "-o", "DPkg::Lock::Timeout=300", "install", "-y", "-q", "--no-install-recommends", debs[0])

	listed := run(t, "dpkg", "-L", "sluice")
	for _, want := range []string{"/usr/sbin/ipf", "/usr/sbin/sluice", "/usr/libexec/sluice/ipfboot", "/lib/systemd/system/sluice.service",
		"/lib/systemd/system/sluice-resync@.service", "/lib/udev/rules.d/90-sluice.rules",
		"/usr/share/man/man8/ipf.8.gz", "/usr/share/man/man5/ipqos.conf.5.gz", "/usr/share/doc/sluice/changelog.Debian.gz",
		"/usr/share/doc/sluice/copyright", "/etc/sluice/sluice.conf", "/usr/share/sluice/grafana/sluice.json"} {
		if !strings.Contains(listed, want+"\n") {
			t.Errorf("dpkg -L sluice lacks %s", want)
		}
	}
	if p := strings.TrimSpace(run(t, "man", "-w", "8", "ipf")); p != "/usr/share/man/man8/ipf.8.gz" {
		t.Errorf("man -w 8 ipf: %s", p)
	}
	// Debian's policy: every man page gzip'd (-9n)
	for _, l := range strings.Split(listed, "\n") {
		if strings.HasPrefix(l, "/usr/share/man/man") && strings.Count(l, "/") == 5 && !strings.HasSuffix(l, ".gz") {
			t.Errorf("man page not compressed: %s", l)
		}
	}
	units, _ := filepath.Glob("/lib/systemd/system/sluice*.service")
	if len(units) != 5 {
		t.Errorf("units: %v", units)
	} else if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		run(t, sa, append([]string{"verify"}, units...)...)
	}
	// the package enables nothing
	if m, _ := filepath.Glob("/etc/systemd/system/*/sluice*"); len(m) > 0 {
		t.Errorf("the package enabled units: %v", m)
	}
	doc, _ := exec.Command("/usr/sbin/sluice", "doctor").CombinedOutput()
	if !strings.Contains(string(doc), "ok    path") || !strings.Contains(string(doc), "(/usr/sbin)") {
		t.Errorf("sluice doctor does not find the installed commands:\n%s", doc)
	}

	// boot script and example configuration, then the exporter scraped
	e := newBootEnv(t, "slpkg", "/usr/sbin", "/usr/libexec/sluice/ipfboot")
	ex, err := os.ReadFile("/usr/share/sluice/examples/ipf/host-firewall.conf")
	if err != nil {
		t.Fatal(err)
	}
	// the example's external interface is eth0: here it is the test link
	conf := e.write("ipf.conf", strings.Replace(string(ex), `ext = "eth0";`, `ext = "`+e.link+`";`, 1))
	e.write("sluice.conf", fmt.Sprintf("IPF_CONF=%s\nIPPOOL_CONF=/etc/sluice/ippool.conf\nIPNAT_CONF=/etc/sluice/ipnat.conf\nIPMON_START=0\n", conf))
	e.boot(0, "start")
	l := e.listen(9)
	e.send(9, 4)
	if n := l.count(9); n != 0 {
		t.Errorf("the example lets %d datagrams to port 9 in", n)
	}
	addr := startExporter(t, e)
	prom := promtest.Start(t, func(fn func() error) error { return e.tp.Do(topo.SUT, fn) }, addr)
	wait := 30 * time.Second
	prom.WaitFor(t, `up{job="sluice"}`, wait, promtest.One(1))
	prom.WaitFor(t, `sluice_filter_rules`, wait, promtest.One(14))
	// the 4 datagrams fell through to the example's last rule (the test
	// bed carries no IPv6, so no neighbour discovery joins them; at least
	// 4 all the same: an absence cannot be waited for)
	prom.WaitFor(t, `sluice_rule_packets_total{rule="block in on `+e.link+` all"}`, wait,
		func(r []promtest.Sample) bool { return len(r) == 1 && r[0].Value >= 4 })
	checkDashboard(t, prom, "/usr/share/sluice/grafana/sluice.json")
	e.boot(0, "stop")

	run(t, "apt-get", "-o", "DPkg::Lock::Timeout=300", "purge", "-y", "-q", "sluice")
	purged = true
	if _, err := os.Stat(runDir); err == nil {
		t.Errorf("%s is still there after the purge", runDir)
	}
	restoreRun()
	after := snapshot(t)
	if added := diff(before, after); len(added) > 0 {
		t.Errorf("left behind after purge: %v", added)
	}
	if removed := diff(after, before); len(removed) > 0 {
		t.Errorf("removed by install and purge: %v", removed)
	}
}

// startExporter starts the installed `sluice exporter` in the SUT
// namespace on a free loopback port and returns its address. The rules'
// texts are labels only with --rule-text (off by default: they would be
// open to every local user).
func startExporter(t *testing.T, e *bootEnv) string {
	t.Helper()
	cmd := exec.Command("/usr/sbin/sluice", "exporter", "--listen", "127.0.0.1:0", "--rule-text", "--pindir", e.pin, "--qos-pindir", e.qos)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.tp.Do(topo.SUT, cmd.Start); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	line, err := bufio.NewReader(stderr).ReadString('\n')
	m := regexp.MustCompile(`listening on http://([0-9.:]+)/metrics`).FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("exporter said %q (%v)", line, err)
	}
	go func() {
		b := make([]byte, 4096)
		for {
			if _, err := stderr.Read(b); err != nil {
				return
			}
		}
	}()
	return m[1]
}

// checkDashboard evaluates every query of a Grafana dashboard in
// Prometheus (with the dashboard's variables given values): each must be
// valid PromQL and name only metrics that exist.
func checkDashboard(t *testing.T, prom *promtest.Server, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	r := strings.NewReplacer("$__rate_interval", "1m", "$instance", ".*")
	n := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			if _, err := prom.Query(r.Replace(tg.Expr)); err != nil {
				t.Errorf("dashboard panel %q: %v", p.Title, err)
			}
			n++
		}
	}
	if n == 0 {
		t.Error("no queries in the dashboard")
	}
}

// TestKeepDir: keepDir gives back a directory tree as it was (files,
// modes, a subdirectory) after it was removed or changed, and is a no-op
// for a directory that did not exist. TestPrivilegedDebPackage uses it for
// a host's /run/sluice, which the purge removes; before it, the test
// failed on any host whose /run/sluice existed, and took the host's pool
// store with it.
func TestKeepDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.MkdirAll(filepath.Join(dir, "pools"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pools", "pools.json"), []byte(`{"v":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	tree := func() string {
		var b strings.Builder
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				fmt.Fprintf(&b, "%s: %v\n", p, err)
				return nil
			}
			fi, _ := d.Info()
			c, _ := os.ReadFile(p)
			fmt.Fprintf(&b, "%s %v %q\n", strings.TrimPrefix(p, dir), fi.Mode(), c)
			return nil
		})
		return b.String()
	}
	want := tree()
	restore := keepDir(t, dir)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	restore()
	if got := tree(); got != want {
		t.Errorf("after removal and restore:\n%s\nwant:\n%s", got, want)
	}
	// changed, not removed: the copy replaces what is there
	restore = keepDir(t, dir)
	os.WriteFile(filepath.Join(dir, "pools", "pools.json"), []byte("changed"), 0o600)
	os.WriteFile(filepath.Join(dir, "extra"), nil, 0o600)
	restore()
	if got := tree(); got != want {
		t.Errorf("after a change and restore:\n%s\nwant:\n%s", got, want)
	}
	absent := filepath.Join(t.TempDir(), "absent")
	keepDir(t, absent)()
	if _, err := os.Lstat(absent); !os.IsNotExist(err) {
		t.Errorf("restoring a directory that did not exist: %v", err)
	}
}
