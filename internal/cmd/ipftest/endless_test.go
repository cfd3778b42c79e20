//go:build unix

package ipftest

import (
	"bytes"
	"strings"
	"testing"

	"sluice/internal/testutil"
)

// TestEndlessFileBounded: ipftest read a rule file (-r, -N, -P) whole, so
// a FIFO or device that never ends (`ipftest -r /dev/zero`) grew it
// without bound, as ipf and ipnat did (ops17). The FIFO's writer sends
// twice the (lowered) bound and closes: without the bound the read ends
// with all of it and ipftest runs the rules.
func TestEndlessFileBounded(t *testing.T) {
	defer func(m int64) { maxFileSize = m }(maxFileSize)
	maxFileSize = 1 << 20
	for _, c := range []struct{ flag, line string }{
		{"-r", "pass in all\n"},
		{"-N", "map eth0 10.1.0.0/16 -> 0/32\n"},
		{"-P", "table role = ipf type = tree number = 1 { 10.1.0.0/16; };\n"},
	} {
		fifo, wait := testutil.FIFO(t, []byte(strings.Repeat(c.line, int(2*maxFileSize)/len(c.line))))
		var out, errb bytes.Buffer
		rc := Main(Env{Args: []string{c.flag, fifo, "-i", "/dev/null"}, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
		wait()
		if rc == 0 || !strings.Contains(errb.String(), "more than 1 MiB") {
			t.Errorf("ipftest %s FIFO of %d bytes: exit %d, stderr %q; want an error saying \"more than 1 MiB\"", c.flag, 2*maxFileSize, rc, errb.String())
		}
	}
}
