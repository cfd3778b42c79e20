package ipf

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDCAMode: -m e|d|q|t goes to the backend as HP-UX's DCA mode, any
// other -m argument is still a 5.x exp filter for the next -F.
func TestDCAMode(t *testing.T) {
	fb := &fakeBackend{}
	c := &Command{Backend: fb, Stdin: strings.NewReader("")}
	_, stderr, code := run(t, c, "-m", "e", "-m", "q", "-m", "d", "-m", "t", "-m", "tcp.state=4;", "-FS")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := []string{"-m set0 e", "-m set0 q", "-m set0 d", "-m set0 t", "-F S tcp.state = 4;"}
	if d := cmp.Diff(want, fb.calls); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
}
