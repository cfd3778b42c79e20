package ipnat

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice/internal/ipfctl"
)

// fakeDevice records what ipnat asks of the kernel.
type fakeDevice struct {
	calls []string
	rules []string
	fail  error
}

func (d *fakeDevice) Apply(ch ipfctl.NATChange) (int, int, error) {
	var calls []string
	if ch.Flush {
		calls = append(calls, "flush")
	}
	if ch.Clear {
		calls = append(calls, "clear")
	}
	for _, f := range ch.Files {
		calls = append(calls, fmt.Sprintf("add %s remove=%v purge=%v n=%d", f.Name, ch.Remove, ch.Purge, len(f.Rules)))
	}
	d.calls = append(d.calls, strings.Join(calls, ","))
	if d.fail != nil {
		return 0, 0, d.fail
	}
	cleared := 0
	if ch.Clear {
		cleared = len(d.rules)
		d.rules = nil
	}
	for _, f := range ch.Files {
		for _, r := range f.Rules {
			d.rules = append(d.rules, strings.TrimSpace(r.String()))
		}
	}
	flushed := 0
	if ch.Flush {
		flushed = 3
	}
	return flushed, cleared, nil
}

func (d *fakeDevice) List(w io.Writer, hits, verbose bool) error {
	d.calls = append(d.calls, fmt.Sprintf("list hits=%v verbose=%v", hits, verbose))
	return nil
}

func (d *fakeDevice) Stats(w io.Writer, verbose bool) error {
	d.calls = append(d.calls, "stats")
	return nil
}

// TestRunOrder checks IPFilter's order of operations: flush and clear
// first, then the files, then listing and statistics; and that a file
// that does not parse changes nothing.
func TestRunOrder(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.nat")
	bad := filepath.Join(dir, "bad.nat")
	os.WriteFile(good, []byte("map eth0 10.0.0.0/8 -> 0/32 portmap tcp/udp auto\nrdr eth0 0/0 port 80 -> 10.0.0.5 port 8080 tcp\n"), 0o644)
	os.WriteFile(bad, []byte("map eth0 10.0.0.0/8 ->\n"), 0o644)
	tests := []struct {
		args  []string
		code  int
		calls string
		out   string
	}{
		{[]string{"-f", good}, 0, "add " + good + " remove=false purge=false n=2", ""},
		{[]string{"-lsh", "-CF", "-f", good}, 0, "flush,clear,add " + good + " remove=false purge=false n=2|list hits=true verbose=false|stats",
			"3 entries flushed from NAT table\n0 entries flushed from NAT list\n"},
		{[]string{"-rpf", good}, 0, "add " + good + " remove=true purge=true n=2", ""},
		{[]string{"-pf", good}, 1, "", ""},
		// a file that does not parse stops everything, flushes included
		{[]string{"-F", "-f", good, "-f", bad}, 1, "", ""},
		{[]string{"-l", "-v"}, 0, "list hits=false verbose=true", ""},
	}
	for _, tc := range tests {
		d := &fakeDevice{}
		var out, errb bytes.Buffer
		c := &Command{Device: d, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb}
		code := c.Run(tc.args)
		if code != tc.code || strings.Join(d.calls, "|") != tc.calls || out.String() != tc.out {
			t.Errorf("%v: got exit %d calls %q output %q, want %d %q %q (stderr %q)", tc.args, code, strings.Join(d.calls, "|"),
				out.String(), tc.code, tc.calls, tc.out, errb.String())
		}
	}
}

// TestRunDeviceError reports a refused load and exits non-zero.
func TestRunDeviceError(t *testing.T) {
	d := &fakeDevice{fail: errors.New("x.nat:1:1: divert rules wrap packets: not supported")}
	var out, errb bytes.Buffer
	c := &Command{Device: d, Stdin: strings.NewReader("divert in on eth0 from any to any -> src 127.0.0.1,1 dst 127.0.0.1,2 udp;\n"), Stdout: &out, Stderr: &errb}
	if code := c.Run([]string{"-f", "-"}); code != 1 || !strings.Contains(errb.String(), "x.nat:1:1: divert") {
		t.Errorf("got exit %d stderr %q, want 1 and the device's error", code, errb.String())
	}
}
