//go:build unix

package ipnat

import (
	"bytes"
	"strings"
	"testing"

	"sluice/internal/testutil"
)

// TestEndlessFileBounded: ipnat read a rule file with os.ReadFile (and
// standard input whole), so a FIFO or device that never ends (`ipnat -f
// /dev/zero`) grew it without bound. The FIFO's writer here sends twice
// the (lowered) bound and closes: without the bound the read ends with
// all of it and parses it.
func TestEndlessFileBounded(t *testing.T) {
	defer func(m int64) { maxFileSize = m }(maxFileSize)
	maxFileSize = 1 << 20
	line := "map eth0 10.1.0.0/16 -> 0/32\n"
	fifo, wait := testutil.FIFO(t, []byte(strings.Repeat(line, int(2*maxFileSize)/len(line))))
	var out, errb bytes.Buffer
	_, code := parseOne(fifo, false, strings.NewReader(""), &out, &errb)
	wait()
	if code != 1 || !strings.Contains(errb.String(), "more than 1 MiB") {
		t.Fatalf("ipnat -f FIFO of %d bytes: exit %d, stderr %q; want 1 and \"more than 1 MiB\"", 2*maxFileSize, code, errb.String())
	}
}
