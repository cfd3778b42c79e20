//go:build unix

package ipf

import (
	"strings"
	"testing"

	"sluice/internal/testutil"
)

// TestEndlessFileBounded: a rule "file" that is a FIFO (or a device) has
// no size to check first; ipf read it whole with os.ReadFile, so one that
// never ends (`ipf -f /dev/zero`, a pipe whose writer never closes) grew
// ipf without bound (ops17: 45 MB/s until the host's memory was gone).
// Here the FIFO's writer sends twice the (lowered) bound and closes, so
// without the bound the read ends with the whole of it and no error.
func TestEndlessFileBounded(t *testing.T) {
	defer func(m int64) { maxFileSize = m }(maxFileSize)
	maxFileSize = 1 << 20
	fifo, wait := testutil.FIFO(t, []byte(strings.Repeat("pass in all\n", int(2*maxFileSize)/12)))
	// -n: parse only, with no datapath (Backend nil).
	_, stderr, code := run(t, &Command{}, "-n", "-f", fifo)
	wait()
	if code != 1 || !strings.Contains(stderr, "more than 1 MiB") {
		t.Fatalf("ipf -n -f FIFO of %d bytes: exit %d, stderr %q; want exit 1 and \"more than 1 MiB\"",
			2*maxFileSize, code, stderr)
	}
}
