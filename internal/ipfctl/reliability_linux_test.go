package ipfctl

// Live tests of issue 10's "loads that lose or corrupt rules" and "errors
// that hide the truth": concurrent ipf runs, a load killed half way, a
// command line with a bad file, an unprivileged user, a private /sys
// (ip netns exec), bad input the kernel cannot take, lost log records;
// and issue 16's confirm-or-roll-back load and live dry run.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ruleFile writes n distinct rules that never match the test's traffic;
// tag keeps the rules of different files apart.
func (tp *topo) ruleFile(name string, tag, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "block in quick proto tcp from 198.%d.%d.%d to any port = %d\n", 18+tag, i/250, i%250+1, 10000+i%50000)
	}
	return tp.file(name, b.String())
}

// countRules counts the rules ipfstat lists for the given flags (-io or
// -Iio), failing the test on a blank line (a rule without its text).
func (tp *topo) countRules(flags string) int {
	tp.t.Helper()
	code, out, _ := tp.run("ipfstat", flags)
	if code != 0 {
		return -1
	}
	n := 0
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		switch {
		case l == "":
			if out != "" {
				tp.t.Errorf("ipfstat %s lists a blank rule", flags)
			}
		case !strings.HasPrefix(l, "#"):
			n++
		}
	}
	return n
}

// TestPrivilegedConcurrentLoads runs ipf in parallel on one datapath: four
// runs adding 500 rules each to a 501-rule set must leave 2 501 rules
// (the read-modify-write of each is one transaction), and four runs that
// replace the inactive set and swap must each leave complete sets.
func TestPrivilegedConcurrentLoads(t *testing.T) {
	tp := sharedTopo(t)
	tp.mustRun("ipf", "-Fa", "-f", tp.ruleFile("base.conf", 0, 500), "-f", tp.file("pass.conf", "pass out all\n"))
	var files []string
	for k := 1; k <= 4; k++ {
		files = append(files, tp.ruleFile(fmt.Sprintf("add%d.conf", k), k, 500))
	}
	parallel := func(args func(k int) []string) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make([]string, len(files))
		for k := range files {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, _, stderr := tp.run("ipf", args(k)...)
				if code != 0 {
					errs[k] = fmt.Sprintf("ipf %v: exit %d: %s", args(k), code, stderr)
				}
			}()
		}
		wg.Wait()
		for _, e := range errs {
			if e != "" {
				t.Error(e)
			}
		}
	}
	t0 := time.Now()
	parallel(func(k int) []string { return []string{"-f", files[k]} })
	t.Logf("4 parallel ipf -f of 500 rules onto 501: %v", time.Since(t0))
	if n := tp.countRules("-io"); n != 501+4*500 {
		t.Errorf("after 4 parallel loads of 500 rules onto 501: %d rules, want %d", n, 501+4*500)
	}

	t0 = time.Now()
	parallel(func(k int) []string { return []string{"-I", "-Fa", "-f", files[k], "-s"} })
	t.Logf("4 parallel ipf -I -Fa -f (500 rules) -s: %v", time.Since(t0))
	// each run swapped a complete 500-rule set in; the last one's is
	// active and the one before it inactive
	if a, i := tp.countRules("-io"), tp.countRules("-Iio"); a != 500 || i != 500 {
		t.Errorf("after 4 parallel replace-and-swap runs: %d active and %d inactive rules, want 500 and 500", a, i)
	}
}

// TestPrivilegedKilledLoadLeavesCompleteSets kills `ipf -I -Fa -f
// 16k.conf -s` at several points of its run: the inactive set that
// ipfstat lists and ipf -s activates afterwards must be either the one
// before or the whole new one, never half written.
func TestPrivilegedKilledLoadLeavesCompleteSets(t *testing.T) {
	tp := sharedTopo(t)
	big := tp.ruleFile("16k.conf", 0, 16000)
	small := tp.file("small.conf", "pass in all\npass out all\n")
	// how long a whole run takes here
	tp.mustRun("ipf", "-Fa", "-f", small, "-I", "-Fa")
	t0 := time.Now()
	tp.mustRun("ipf", "-I", "-Fa", "-f", big)
	whole := time.Since(t0)
	t.Logf("ipf -I -Fa -f 16k.conf: %v", whole)
	for _, frac := range []float64{0.2, 0.5, 0.8, 0.95} {
		tp.mustRun("ipf", "-Fa", "-f", small, "-I", "-Fa", "-f", small)
		c := tp.cmd("ipf", "-I", "-Fa", "-f", big, "-s")
		if err := tp.start(c); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(float64(whole) * frac))
		c.Process.Signal(syscall.SIGKILL)
		c.Wait()
		in := tp.countRules("-Iio")
		act := tp.countRules("-io")
		// killed before the swap: inactive is old (2) or new (16 000) and
		// active old; killed after it: active new and inactive old
		ok := (act == 2 && (in == 2 || in == 16000)) || (act == 16000 && in == 2)
		if !ok {
			t.Errorf("killed at %.0f%%: %d active and %d inactive rules listed", frac*100, act, in)
		}
		tp.mustRun("ipf", "-s")
		if a := tp.countRules("-io"); a != 2 && a != 16000 {
			t.Errorf("killed at %.0f%%, then ipf -s: %d active rules, want 2 or 16000", frac*100, a)
		}
	}
	tp.mustRun("ipf", "-Fa", "-I", "-Fa")
}

// TestPrivilegedBadLineChangesNothing: a command line with an error
// anywhere changes nothing, not even the steps before the error.
func TestPrivilegedBadLineChangesNothing(t *testing.T) {
	tp := sharedTopo(t)
	good := tp.file("good.conf", "pass in all\npass out all\nblock in proto udp from any to any port = 9\n")
	tp.mustRun("ipf", "-Fa", "-f", good)
	before := tp.mustRun("ipfstat", "-io")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-Fa", "-f", tp.file("typo.conf", "pass in al\n")}, "typo.conf:1:"},
		{[]string{"-Fa", "-f", good, "-f", tp.file("typo2.conf", "block in from 1.2.3.4/40 to any\n")}, "typo2.conf:1:"},
		{[]string{"-Fa", "-r", "-f", tp.file("notloaded.conf", "block in proto tcp from any to any port = 7\n")}, "rule not loaded"},
		{[]string{"-Fa", "-f", good, "-T", "no_such_tunable=1"}, "unknown tunable"},
		{[]string{"-Fa", "-f", good, "-T", "state_max=0"}, "outside"},
		// a set whose scan could outrun the kernel's step budget (the
		// 16 384-rule cap this case used is gone)
		{[]string{"-Fa", "-f", tp.file("costly.conf", "pass in all head s\npass in all head s group s\npass in all head s group s\npass in all head s group s\n")}, "head rules"},
	} {
		code, _, stderr := tp.run("ipf", tc.args...)
		if code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("ipf %v: exit %d, stderr %q; want 1 and %q", tc.args, code, stderr, tc.want)
		}
		if after := tp.mustRun("ipfstat", "-io"); after != before {
			t.Errorf("ipf %v changed the rules:\n%s\nwant:\n%s", tc.args, after, before)
		}
	}
	if err := tp.tcpEcho(tp.a, addrB, 2*time.Second); err != nil {
		t.Errorf("TCP after the failed runs: %v", err)
	}
	// (the limit message, loaded + added rules over bpf.MaxRules, would
	// now take four million rules to show)
	tp.mustRun("ipf", "-Fa")
}

// TestPrivilegedUnprivileged runs the commands as nobody: every one that
// needs the datapath must say that permission was denied and fail, and
// none may change anything.
func TestPrivilegedUnprivileged(t *testing.T) {
	tp := sharedTopo(t)
	tp.mustRun("ipf", "-Fa", "-f", tp.file("np.conf", "pass in all\npass out all\n"))
	before := tp.mustRun("ipfstat", "-io")
	// nobody must be able to run the binaries (the directory is 0700)
	if err := os.Chmod(tp.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	nobody := func(name string, args ...string) (int, string) {
		c := tp.cmd(name, args...)
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var o, e bytes.Buffer
		c.Stdout, c.Stderr = &o, &e
		if err := tp.start(c); err != nil {
			t.Fatalf("%s as nobody: %v", name, err)
		}
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			c.Process.Kill()
			<-done
			t.Errorf("%s %v as nobody: still running after 10 s (stdout %q)", name, args, o.String())
		}
		return c.ProcessState.ExitCode(), e.String()
	}
	for _, tc := range [][]string{
		{"ipf", "-D"}, {"ipf", "-Fa"}, {"ipf", "-FS"}, {"ipf", "-T", "list"}, {"ipf", "-V"}, {"ipf", "-s"},
		{"ipf", "-f", filepath.Join(tp.tmp, "np.conf")}, {"ipf", "-C"},
		{"ipfstat"}, {"ipfstat", "-io"}, {"ipfstat", "-s"},
		{"ipmon", "-a"}, {"ipmon", "-F"},
		{"ipqosadmin", "-state", "-pindir", filepath.Join(tp.tmp, "bpffs", "qos")},
		{"ipqosadmin", "-showconfig", "-pindir", filepath.Join(tp.tmp, "bpffs", "qos")},
		{"ipqosadmin", "-unload", "-pindir", filepath.Join(tp.tmp, "bpffs", "qos")},
		{"ippool", "-l"},
	} {
		t0 := time.Now()
		code, stderr := nobody(tc[0], tc[1:]...)
		t.Logf("%v as nobody: %v", tc, time.Since(t0))
		if code == 0 || !strings.Contains(stderr, "permission denied") {
			t.Errorf("%v as nobody: exit %d, stderr %q; want non-zero and permission denied", tc, code, stderr)
		}
	}
	// a dry run needs no privileges: it only checks the file
	pub, err := os.CreateTemp("", "ipfctl-np-*.conf")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(pub.Name())
	pub.WriteString("pass in all\n")
	pub.Close()
	os.Chmod(pub.Name(), 0o644)
	if code, stderr := nobody("ipf", "-n", "-f", pub.Name()); code != 0 {
		t.Errorf("ipf -n as nobody: exit %d, stderr %q", code, stderr)
	}
	if after := tp.mustRun("ipfstat", "-io"); after != before {
		t.Errorf("runs as nobody changed the rules:\n%s\nwant:\n%s", after, before)
	}
}

// TestPrivilegedPrivateSys runs ipf as `ip netns exec` does: in a mount
// namespace of its own with a fresh sysfs on /sys, where /sys/fs/bpf is
// empty. Pins made there would vanish with the process, so ipf must
// refuse, say what to do instead, and mount nothing.
func TestPrivilegedPrivateSys(t *testing.T) {
	tp := sharedTopo(t)
	rules := tp.file("ns.conf", "pass in all\n")
	script := fmt.Sprintf(`mount -t sysfs sysfs /sys || exit 99
%[1]s/ipf -Fa -f %[2]s
echo "ipf exit $?"
%[1]s/ipfstat -io
echo "ipfstat exit $?"
%[1]s/ipf -V >/dev/null
echo "ipf -V exit $?"
stat -f -c %%T /sys/fs/bpf
`, tp.bin, rules)
	c := exec.Command("sh", "-c", script)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, PinDirEnv+"=") {
			c.Env = append(c.Env, e)
		}
	}
	c.SysProcAttr = &syscall.SysProcAttr{Unshareflags: unix.CLONE_NEWNS | unix.CLONE_NEWNET}
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s := string(out)
	if !strings.Contains(s, "ipf exit 1") || !strings.Contains(s, "ip netns exec") || !strings.Contains(s, "nsenter --net") {
		t.Errorf("ipf under a private /sys:\n%s\nwant exit 1 and a message naming ip netns exec and nsenter --net", s)
	}
	// the readers say why they see nothing, rather than "not loaded"
	if !strings.Contains(s, "ipfstat exit 1") || !strings.Contains(s, "ipf -V exit 1") || strings.Count(s, "ip netns exec") < 3 {
		t.Errorf("ipfstat and ipf -V under a private /sys:\n%s", s)
	}
	if !strings.HasSuffix(s, "sysfs\n") {
		t.Errorf("something was mounted on /sys/fs/bpf:\n%s", s)
	}
}

// TestPrivilegedPoolTooLarge: a pool table the kernel's pool map cannot
// hold is refused with the file and line of its definition (ippool) or of
// the rule that names it (ipf), not with ENOSPC, and nothing changes.
func TestPrivilegedPoolTooLarge(t *testing.T) {
	tp := sharedTopo(t)
	t.Cleanup(func() { tp.t = t; tp.mustRun("ippool", "-F") })
	table := func(name string, n int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "# %d entries\n\ntable role = ipf type = tree number = 100 {", n)
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, " 10.%d.%d.%d/32;", i>>16&255, i>>8&255, i&255)
		}
		b.WriteString(" };\n")
		return tp.file(name, b.String())
	}
	tp.mustRun("ippool", "-f", table("small-pool.conf", 10))
	rules := tp.file("usepool.conf", "pass in all\npass out all\nblock in quick from pool/100 to any port = 9\n")
	tp.mustRun("ipf", "-Fa", "-f", rules)
	before := tp.mustRun("ipfstat", "-io")
	code, _, stderr := tp.run("ippool", "-f", table("huge-pool.conf", 70000))
	if code != 1 || !regexp.MustCompile(`huge-pool\.conf:3:1: pool table ipf/100 needs 70000 pool entries`).MatchString(stderr) {
		t.Errorf("ippool -f of 70 000 entries: exit %d, stderr %q", code, stderr)
	}
	if strings.Contains(stderr, "no space left") {
		t.Errorf("ENOSPC leaked: %q", stderr)
	}
	if got := tp.mustRun("ippool", "-l"); !strings.Contains(got, "10.0.0.9/32") || strings.Contains(got, "10.0.1.0/32") {
		t.Errorf("the failed ippool -f changed the tables:\n%.300s", got)
	}
	if after := tp.mustRun("ipfstat", "-io"); after != before {
		t.Errorf("the failed ippool -f changed the rules:\n%s\nwant:\n%s", after, before)
	}
	// the store takes the table while no rule uses it; then ipf refuses
	// the rule, at its line
	tp.mustRun("ipf", "-Fa", "-f", tp.file("nopool.conf", "pass in all\npass out all\n"))
	tp.mustRun("ippool", "-f", table("huge-pool.conf", 70000))
	code, _, stderr = tp.run("ipf", "-Fa", "-f", rules)
	if code != 1 || !strings.Contains(stderr, "usepool.conf:3: the pool tables of the rules need 70000 pool entries") {
		t.Errorf("ipf -f naming a 70 000-entry pool: exit %d, stderr %q", code, stderr)
	}
	if after := tp.mustRun("ipfstat", "-io"); after != "pass in all\npass out all\n" {
		t.Errorf("rules after the refused load:\n%s", after)
	}
}

// TestPrivilegedLoadSkipsUnusedPools: a load whose rules name no pool does
// not read the pool store (a 23 MB store made every load slow); a store
// that does not even parse proves it.
func TestPrivilegedLoadSkipsUnusedPools(t *testing.T) {
	tp := sharedTopo(t)
	dir := filepath.Join(tp.tmp, "pools")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "pools.json")
	if err := os.WriteFile(store, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(store) })
	tp.mustRun("ipf", "-Fa", "-f", tp.file("plain.conf", "pass in all\npass out all\n"))
	code, _, stderr := tp.run("ipf", "-f", tp.file("withpool.conf", "block in from pool/1 to any\n"))
	if code != 1 || !strings.Contains(stderr, "pool store") {
		t.Errorf("a load that names a pool with a corrupt store: exit %d, stderr %q; want the store's error", code, stderr)
	}
}

// TestPrivilegedIpmonReportsLostRecords stops ipmon while a flood of
// logged packets overflows the log ring, then lets it go on: it must
// report the records the datapath could not log, as IPFilter's ipmon
// reports gaps ("missed N ipf log entries: A B"), and the count must be
// the datapath's log failures.
func TestPrivilegedIpmonReportsLostRecords(t *testing.T) {
	tp := sharedTopo(t)
	tp.mustRun("ipf", "-Fa", "-f", tp.file("flood.conf", "pass in log quick proto udp from any to any port = 5007\npass in all\npass out all\n"))
	tp.mustRun("ipmon", "-F")
	// logAttempts returns the inbound records logged and those the ring
	// had no room for: each logged packet adds one to either, once its
	// attempt is over.
	logAttempts := func() (logged, failed uint64) {
		out := tp.mustRun("ipfstat")
		for _, l := range strings.Split(out, "\n") {
			var o uint64
			switch {
			case strings.HasPrefix(l, " packets logged:"):
				fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(l, " packets logged:")), "input %d output %d", &logged, &o)
			case strings.HasPrefix(l, " log failures:"):
				fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(l, " log failures:")), "input %d output %d", &failed, &o)
			}
		}
		return logged, failed
	}
	logFile := filepath.Join(tp.tmp, "flood.out")
	mon := tp.cmd("ipmon", "-o", "I", logFile)
	if err := tp.start(mon); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { mon.Wait(); close(done) }()
	t.Cleanup(func() { mon.Process.Kill(); <-done })
	// Only this test's datagrams to port 5007 are logged from here on, so
	// every log attempt after base is one of ours.
	baseLogged, baseFailed := logAttempts()
	baseDrops := tp.txDropped(tp.a, "sla")
	// ipmon is reading once it prints a record
	probes := uint64(0)
	for deadline := time.Now().Add(20 * time.Second); ; { // a hang detector
		tp.sendUDP(tp.a, addrB, 5007, 1)
		probes++
		time.Sleep(50 * time.Millisecond)
		if b, _ := os.ReadFile(logFile); len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ipmon printed nothing in 20 s")
		}
	}
	// every probe's attempt is over (or the veth dropped it)
	var loggedBefore, before, dropsBefore uint64
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) { // a hang detector
		loggedBefore, before = logAttempts()
		dropsBefore = tp.txDropped(tp.a, "sla")
		n := (loggedBefore - baseLogged) + (before - baseFailed) + (dropsBefore - baseDrops)
		if n == probes {
			break
		}
		if n > probes || time.Now().After(deadline) {
			t.Fatalf("%d probes: %d log attempts or veth drops", probes, n)
		}
	}
	mon.Process.Signal(syscall.SIGSTOP)
	// about 20 000 records of ~70 bytes: more than the 1 MiB ring holds
	const flood = 20000
	tp.sendUDP(tp.a, addrB, 5007, flood)
	// The flood is over for the datapath once every datagram was logged,
	// refused by the full ring, or dropped by the veth before the filter
	// (its receive backlog full): count all three, rather than reading
	// after a fixed pause that a loaded machine can outrun. The bound is a
	// hang detector.
	var logged, failed, drops uint64
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		logged, failed = logAttempts()
		drops = tp.txDropped(tp.a, "sla")
		if (logged-loggedBefore)+(failed-before)+(drops-dropsBefore) >= flood {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the flood of %d: %d logged, %d refused, %d dropped by the veth", flood,
				logged-loggedBefore, failed-before, drops-dropsBefore)
		}
	}
	if n := (logged - loggedBefore) + (failed - before) + (drops - dropsBefore); n != flood {
		t.Errorf("the flood of %d: %d logged, %d refused, %d dropped by the veth (%d in all)", flood,
			logged-loggedBefore, failed-before, drops-dropsBefore, n)
	}
	lost := failed - before
	mon.Process.Signal(syscall.SIGCONT)
	if lost == 0 {
		t.Fatalf("the flood lost no records: the ring is larger than the test assumes")
	}
	// the gap shows at a record read after the loss was counted
	re := regexp.MustCompile(`missed (\d+) ipf log entries: (\d+) (\d+)`)
	var m []string
	for deadline := time.Now().Add(20 * time.Second); m == nil && time.Now().Before(deadline); { // a hang detector
		time.Sleep(200 * time.Millisecond)
		tp.sendUDP(tp.a, addrB, 5007, 1)
		b, _ := os.ReadFile(logFile)
		m = re.FindStringSubmatch(string(b))
	}
	if m == nil {
		t.Fatalf("ipmon reported no missed entries after %d were lost", lost)
	}
	n, _ := strconv.ParseUint(m[1], 10, 64)
	from, _ := strconv.ParseUint(m[2], 10, 64)
	to, _ := strconv.ParseUint(m[3], 10, 64)
	if n != lost || to-from != n {
		t.Errorf("ipmon: %q; the datapath counted %d log failures", m[0], lost)
	}
	t.Logf("flood of %d: %d records lost, %d dropped by the veth, reported as %q", flood, lost, drops-dropsBefore, m[0])
}

// txDropped returns the packets a veth end of namespace ns could not pass
// to its peer (the peer's receive backlog was full): they never reached
// the filter.
func (tp *topo) txDropped(ns netns.NsHandle, name string) uint64 {
	tp.t.Helper()
	if st := tp.linkIn(ns, name).Attrs().Statistics; st != nil {
		return st.TxDropped
	}
	tp.t.Fatalf("%s: no statistics", name)
	return 0
}

// TestPrivilegedRollbackUnconfirmed loads, with ipf -W, a set that blocks
// the test's own connection: nobody confirms, and the previous set comes
// back by itself. A confirmed load stays.
func TestPrivilegedRollbackUnconfirmed(t *testing.T) {
	tp := sharedTopo(t)
	old := "pass in all\npass out all\n"
	tp.mustRun("ipf", "-Fa", "-f", tp.file("open.conf", old))
	conn, err := tp.dialTCP(tp.a, addrB, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := echo(conn, []byte("before"), 2*time.Second); err != nil {
		t.Fatalf("echo before the load: %v", err)
	}
	lockout := tp.file("lockout.conf", "block in all\npass out all\n")
	out := tp.mustRun("ipf", "-W", "2", "-Fa", "-f", lockout)
	if !strings.Contains(out, "rolled back in 2 s unless confirmed with ipf -C") {
		t.Errorf("ipf -W 2 printed %q", out)
	}
	loaded := time.Now()
	if err := echo(conn, []byte("during"), 500*time.Millisecond); err == nil {
		t.Fatalf("the lockout set let the connection through")
	}
	// wait for the watchdog to restore the set: new connections pass
	var back time.Duration
	for time.Since(loaded) < 8*time.Second {
		if err := tp.tcpEcho(tp.a, addrB, 300*time.Millisecond); err == nil {
			back = time.Since(loaded)
			break
		}
	}
	if back == 0 {
		t.Fatalf("still blocked 8 s after an unconfirmed ipf -W 2; rules:\n%s", tp.mustRun("ipfstat", "-io"))
	}
	// and the connection that was cut off carries on: what it sent
	// while blocked is retransmitted and echoed, then the new message
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("after")); err != nil {
		t.Fatalf("the old connection after the rollback: %v", err)
	}
	var got []byte
	buf := make([]byte, 64)
	for !bytes.HasSuffix(got, []byte("after")) {
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("the old connection after the rollback: %v (read %q)", err, got)
		}
		got = append(got, buf[:n]...)
	}
	t.Logf("rolled back %v after the load", back)
	if got := tp.mustRun("ipfstat", "-io"); got != old {
		t.Errorf("rules after the rollback:\n%s\nwant:\n%s", got, old)
	}
	if code, _, stderr := tp.run("ipf", "-C"); code != 1 || !strings.Contains(stderr, "no load is waiting") {
		t.Errorf("ipf -C after the rollback: exit %d, stderr %q", code, stderr)
	}

	// confirmed within the time: the new set stays; a change made while
	// the rollback is pending is warned about
	newSet := "pass in all\nblock in proto udp from any to any port = 9\npass out all\n"
	// (a window wide enough for the loads in it: the second one may run
	// the verifier for a program made for the other slot, seconds on a
	// busy machine)
	tp.mustRun("ipf", "-W", "8", "-Fa", "-f", tp.file("new.conf", newSet[:len(newSet)-len("pass out all\n")]))
	confirmWindow := time.Now().Add(8 * time.Second)
	if code, _, stderr := tp.run("ipf", "-f", tp.file("more.conf", "pass out all\n")); code != 0 || !strings.Contains(stderr, "waits for confirmation") {
		t.Errorf("a load while a rollback is pending: exit %d, stderr %q; want a warning", code, stderr)
	}
	if out := tp.mustRun("ipf", "-C"); !strings.Contains(out, "confirmed") {
		t.Errorf("ipf -C printed %q", out)
	}
	time.Sleep(time.Until(confirmWindow) + time.Second)
	if got := tp.mustRun("ipfstat", "-io"); got != newSet {
		t.Errorf("rules after the window of a confirmed ipf -W 8:\n%s\nwant:\n%s", got, newSet)
	}
}

// TestPrivilegedRollbackOfFirstLoad: an unconfirmed -W load onto a host
// with no filter removes the filter again.
func TestPrivilegedRollbackOfFirstLoad(t *testing.T) {
	tp := ownTopo(t)
	tp.mustRun("ipf", "-W", "1", "-f", tp.file("first.conf", "block in all\npass out all\n"))
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(tp.pinDir); os.IsNotExist(err) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := os.Stat(tp.pinDir); !os.IsNotExist(err) {
		t.Fatalf("pins still there 6 s after an unconfirmed first load: %v", err)
	}
	if n := tp.tcxPrograms("slb"); n != 0 {
		t.Errorf("%d programs still attached", n)
	}
	tp.flows()
}

// TestPrivilegedDryRunReportsChanges: ipf -n on a host with a loaded
// filter says what each list would gain and lose, and changes nothing.
func TestPrivilegedDryRunReportsChanges(t *testing.T) {
	tp := sharedTopo(t)
	tp.mustRun("ipf", "-Fa", "-f", tp.file("dry-old.conf", "pass in all\nblock in proto udp from any to any port = 9 head 7\npass out all\nblock in from 1.1.1.1 to any group 7\n"))
	before := tp.mustRun("ipfstat", "-io")
	out := tp.mustRun("ipf", "-n", "-Fa", "-f", tp.file("dry-new.conf", "pass in all\nblock in proto udp from any to any port = 9 head 7\npass out quick all\nblock in from 2.2.2.2 to any group 7\n"))
	want := "# active set, main list out: 1 added, 1 removed\n- pass out all\n+ pass out quick all\n" +
		"# active set, group 7: 1 added, 1 removed\n- block in inet proto udp from 1.1.1.1/32 to any group 7\n+ block in inet proto udp from 2.2.2.2/32 to any group 7\n"
	if out != want {
		t.Errorf("ipf -n:\n%s\nwant:\n%s", out, want)
	}
	if after := tp.mustRun("ipfstat", "-io"); after != before {
		t.Errorf("ipf -n changed the rules:\n%s\nwant:\n%s", after, before)
	}
	// a dry run that would fail says so
	code, _, stderr := tp.run("ipf", "-n", "-r", "-f", tp.file("dry-rm.conf", "block in all\n"))
	if code != 1 || !strings.Contains(stderr, "rule not loaded") {
		t.Errorf("ipf -n -r of a rule not loaded: exit %d, stderr %q", code, stderr)
	}
}
