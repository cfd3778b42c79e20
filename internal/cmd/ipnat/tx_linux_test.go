//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package ipnat

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	cli "sluice/internal/cmd/ipf"
	"sluice/internal/ipfctl"
)

// run runs ipnat (or, with ipf, ipf) in the gateway from any goroutine:
// it reports instead of failing the test.
func (w *gwTopo) run(ipf bool, args ...string) (int, string) {
	var o, e bytes.Buffer
	var code int
	err := w.in(w.g, func() error {
		if ipf {
			b := ipfctl.NewKernel(w.pinDir)
			defer b.Close()
			c := &cli.Command{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Backend: b}
			code = c.Run(args)
			return nil
		}
		code = Main(args, strings.NewReader(""), &o, &e)
		return nil
	})
	if err != nil {
		return -1, err.Error()
	}
	return code, o.String() + e.String()
}

// loadedRules returns the rule lines of ipnat -l.
func (w *gwTopo) loadedRules() []string {
	w.t.Helper()
	out := w.mustIPNAT("-l")
	rules, _, _ := strings.Cut(strings.TrimPrefix(out, "List of active MAP/Redirect filters:\n"), "\n\nList of active sessions:")
	if rules == "" {
		return nil
	}
	return strings.Split(rules, "\n")
}

// TestPrivilegedNATConcurrent runs ipnat -f with different files at the
// same time, and beside ipf loading the filter: each run reads the
// loaded rules, adds its own and writes the set back, so without the
// transaction lock runs overwrite each other. Every rule must be there
// at the end, NAT first inbound and last outbound around the filter.
// About 10 s (each run loads the programs, one at a time).
func TestPrivilegedNATConcurrent(t *testing.T) {
	w := newGW(t)
	const n = 4
	var files []string
	var want []string
	for i := range n {
		r := fmt.Sprintf("map gs0 10.%d.0.0/16 -> 0/32 portmap tcp/udp auto", i+1)
		want = append(want, r)
		files = append(files, w.file(fmt.Sprintf("add%d.conf", i), r+"\n"))
	}
	ipfRules := w.file("c.ipf", "pass in quick on gs0 all keep state\npass out quick on gs0 all keep state\n")
	var wg sync.WaitGroup
	errs := make(chan string, n+1)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, out := w.run(false, "-f", files[i]); code != 0 {
				errs <- fmt.Sprintf("ipnat -f %s: exit %d: %s", files[i], code, out)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if code, out := w.run(true, "-Fa", "-f", ipfRules); code != 0 {
			errs <- fmt.Sprintf("ipf -f: exit %d: %s", code, out)
		}
	}()
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	got := w.loadedRules()
	have := map[string]bool{}
	for _, r := range got {
		have[r] = true
	}
	for _, r := range want {
		if !have[r] {
			t.Errorf("rule %q lost; loaded:\n%s", r, strings.Join(got, "\n"))
		}
	}
	if len(got) != n {
		t.Errorf("%d rules loaded, want %d:\n%s", len(got), n, strings.Join(got, "\n"))
	}
	w.checkOrder("gs0")
}

// TestPrivilegedNATFailedChange checks that a command line whose change
// fails part way changes nothing: a file the kernel cannot do after a
// good one, with -F and -C before them, leaves the rules and sessions as
// they were; so does removing a rule that is not loaded.
func TestPrivilegedNATFailedChange(t *testing.T) {
	w := newGW(t)
	w.serve(w.s, gwS4, gwTCP, gwUDP)
	w.mustIPNAT("-f", w.file("a.nat", "map gs0 192.168.77.0/24 -> 0/32 portmap tcp/udp auto\n"))
	if err := w.udp(w.c, gwS4, gwUDP); err != nil {
		t.Fatalf("UDP through the masquerade: %v", err)
	}
	before, sessions := w.loadedRules(), w.sessions()
	if len(sessions) == 0 {
		t.Fatal("no session to keep")
	}
	good := w.file("good.nat", "rdr gs0 198.51.100.1/32 port 80 -> 192.168.77.2 port 80 tcp\n")
	bad := w.file("bad.nat", "divert in on gs0 from any to any -> src 127.0.0.1,1 dst 127.0.0.1,2 udp;\n")
	missing := w.file("missing.nat", "rdr gs0 198.51.100.1/32 port 81 -> 192.168.77.2 port 81 tcp\n")
	for _, args := range [][]string{
		{"-F", "-C", "-f", good, "-f", bad},
		{"-F", "-r", "-f", missing},
	} {
		code, out := w.run(false, args...)
		if code == 0 {
			t.Errorf("ipnat %v: exit 0, want a failure (%s)", args, out)
		}
		if got := w.loadedRules(); strings.Join(got, "\n") != strings.Join(before, "\n") {
			t.Errorf("ipnat %v failed but changed the rules:\n%s\nwant:\n%s", args, strings.Join(got, "\n"), strings.Join(before, "\n"))
		}
		if got := w.sessions(); strings.Join(got, "\n") != strings.Join(sessions, "\n") {
			t.Errorf("ipnat %v failed but changed the sessions:\n%s\nwant:\n%s", args, strings.Join(got, "\n"), strings.Join(sessions, "\n"))
		}
	}
}
