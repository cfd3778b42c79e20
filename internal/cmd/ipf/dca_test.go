package ipf

import (
	"errors"
	"strings"
	"testing"
)

// dcaBackend is a fakeBackend with HP's DCA mode.
type dcaBackend struct {
	fakeBackend
	modes string
}

func (d *dcaBackend) DCA(mode byte) (string, error) {
	d.modes += string(mode)
	if mode == 'q' {
		return "DCA: enabled\n", nil
	}
	return "", nil
}

// TestDCAMode: -m e|d|q|t goes to the backend's DCA mode (HP-UX), any
// other -m argument is still a 5.x exp filter; a backend without DCA says
// so and ipf fails.
func TestDCAMode(t *testing.T) {
	db := &dcaBackend{}
	c := &Command{Backend: db, Stdin: strings.NewReader("")}
	out, stderr, code := run(t, c, "-m", "e", "-m", "q", "-m", "d", "-m", "t", "-m", "tcp.state=4;", "-FS")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if db.modes != "eqdt" || out != "DCA: enabled\n" {
		t.Errorf("modes %q, out %q", db.modes, out)
	}
	if len(db.calls) != 1 || db.calls[0] != "flushstate S tcp.state = 4;" {
		t.Errorf("calls %q, want the -FS with the exp filter", db.calls)
	}
	fb := &fakeBackend{}
	_, stderr, code = run(t, &Command{Backend: fb}, "-m", "q")
	if code == 0 || !strings.Contains(stderr, "DCA mode") {
		t.Errorf("backend without DCA: exit %d, stderr %q", code, stderr)
	}
	if err := (&Command{Backend: fb}).dca(&options{}, 'q'); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("got %v, want errors.ErrUnsupported", err)
	}
}
