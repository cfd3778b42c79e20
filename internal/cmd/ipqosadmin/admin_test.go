package ipqosadmin

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice/internal/ipfctl"
	"sluice/internal/qos"
)

func runMain(stdin string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	rc := Main(args, strings.NewReader(stdin), &out, &errb)
	return rc, out.String(), errb.String()
}

func TestTestMode(t *testing.T) {
	for _, f := range []string{"text", "hex"} {
		rc, out, errs := runMain("", "-test", "-f", "../../qos/engine/testdata/test.conf", "-i", "../../qos/engine/testdata/packets."+f)
		if rc != 0 {
			t.Fatalf("%s: exit %d: %s", f, rc, errs)
		}
		want := mustRead(t, "../../qos/engine/testdata/packets."+f+".golden")
		if out != want {
			t.Errorf("%s: output differs from the engine's golden file:\n%s", f, out)
		}
	}
	rc, out, _ := runMain("", "-test", "-f", "../../qos/engine/testdata/test.conf", "-i", "../../qos/engine/testdata/packets.text", "-a", "nic0", "-F", "text")
	if rc != 0 || !strings.Contains(out, "policy ftp_p filter ftp_f tos 0x00 -> 0x28") {
		t.Errorf("-a nic0 -F text: exit %d, output:\n%s", rc, out)
	}
	if rc, _, errs := runMain("", "-test", "-f", "../../qos/engine/testdata/test.conf", "-i", "../../qos/engine/testdata/packets.text", "-a", "nope"); rc != 1 || !strings.Contains(errs, "adapter nope is not in the configuration") {
		t.Errorf("-a nope: exit %d, stderr %q", rc, errs)
	}
}

func TestVerify(t *testing.T) {
	if rc, out, errs := runMain("", "-verify", "-f", "../../qos/engine/testdata/test.conf"); rc != 0 || !strings.Contains(out, "valid") {
		t.Errorf("valid file: exit %d, out %q, err %q", rc, out, errs)
	}
	rc, _, errs := runMain("filter f {\n  srcport x\n}\n", "-verify", "-f", "-")
	if rc != 1 {
		t.Errorf("invalid stdin: exit %d, want 1", rc)
	}
	if want := "<stdin>:2:11: expected port number (0-65535), found \"x\""; !strings.Contains(errs, want) {
		t.Errorf("stderr %q does not contain %q", errs, want)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{}, 2},
		{[]string{"-load", "-unload"}, 2},
		{[]string{"-load", "-f", "x", "-abort", "-continue"}, 2},
		{[]string{"-bogus"}, 2},
		{[]string{"-unload", "extra"}, 2},
		{[]string{"-loglevel", "loud"}, 1},
	} {
		if rc, _, errs := runMain("", tc.args...); rc != tc.code || errs == "" {
			t.Errorf("%q: exit %d stderr %q, want %d and a message", tc.args, rc, errs, tc.code)
		}
	}
	for _, h := range []string{"-h", "-help", "--help"} {
		if rc, out, _ := runMain("", h); rc != 0 || !strings.HasPrefix(out, "usage:") {
			t.Errorf("%s: exit %d, stdout %q", h, rc, out)
		}
	}
}

// denied is a datapath the user may not touch.
type denied struct{}

var errDenied = &ipfctl.PermissionError{Err: &fs.PathError{Op: "open", Path: "/sys/fs/bpf/sluice-qos", Err: fs.ErrPermission}}

func (denied) State() (ipfctl.QoSStateInfo, error) { return ipfctl.QoSStateInfo{}, errDenied }
func (denied) Load(*qos.Ruleset, ipfctl.QoSLoadOptions) (*ipfctl.QoSReport, error) {
	return nil, errDenied
}
func (denied) Unload(io.Writer) error         { return errDenied }
func (denied) Config() (string, error)        { return "", errDenied }
func (denied) Stats() ([]qos.Stats, error)    { return nil, errDenied }
func (denied) ResetStats() error              { return errDenied }
func (denied) LogLevel() (uint32, error)      { return 0, errDenied }
func (denied) SetLogLevel(level uint32) error { return errDenied }

// TestPermissionErrors: every action that needs the datapath says that it
// was refused and why, and fails.
func TestPermissionErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-state"}, {"-load", "-f", "../../qos/engine/testdata/test.conf"}, {"-unload"}, {"-showconfig"},
		{"-showstats"}, {"-showstats", "-reset"}, {"-loglevel", "2"},
	} {
		var out, errb bytes.Buffer
		rc := run(args, strings.NewReader(""), &out, &errb, func(string) ipfctl.QoS { return denied{} })
		if rc != 1 || !strings.Contains(errb.String(), "permission denied") || !strings.Contains(errb.String(), "needs root") {
			t.Errorf("%v: exit %d, stderr %q", args, rc, errb.String())
		}
	}
}

func TestPrintStats(t *testing.T) {
	stats := []qos.Stats{{Adapter: "eth0", Policies: []qos.PolicyStats{
		{Name: "p1", Packets: 3, Bytes: 300, DroppedPackets: 1, Filters: []qos.FilterStats{{Name: "f1", Packets: 2, Bytes: 200}, {Name: "f2", Packets: 1, Bytes: 100}}},
		{Name: "p2", Filters: []qos.FilterStats{{Name: "f3"}}},
	}}}
	for _, tc := range []struct{ sel, want string }{
		{"eth0/p1/f2", "Adapter: eth0\n  Policy: p1\n    packets 3 bytes 300 dropped_packets 1 dropped_bytes 0\n    Filter: f2 packets 1 bytes 100\n"},
		{"eth0/p2", "Adapter: eth0\n  Policy: p2\n    packets 0 bytes 0 dropped_packets 0 dropped_bytes 0\n    Filter: f3 packets 0 bytes 0\n"},
	} {
		var b bytes.Buffer
		if err := PrintStats(&b, stats, tc.sel); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.sel, b.String(), tc.want)
		}
	}
	var b bytes.Buffer
	for _, sel := range []string{"eth1", "eth0/p3", "eth0/p1/f9", "a/b/c/d"} {
		if err := PrintStats(&b, stats, sel); err == nil {
			t.Errorf("%s: no error", sel)
		}
	}
}

func mustRead(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestExamples(t *testing.T) {
	confs, _ := filepath.Glob("../../../examples/ipqos/*.conf")
	if len(confs) < 2 {
		t.Fatalf("found %d example configurations, want at least 2", len(confs))
	}
	for _, c := range confs {
		if rc, _, errs := runMain("", "-verify", "-f", c); rc != 0 {
			t.Errorf("%s: exit %d: %s", c, rc, errs)
		}
	}
	rc, out, errs := runMain("", "-test", "-f", "../../../examples/ipqos/voice_video.conf", "-i", "../../../examples/ipqos/packets.txt")
	if rc != 0 {
		t.Fatalf("exit %d: %s", rc, errs)
	}
	for _, want := range []string{"policy voice filter sip", "policy voice filter rtp", "policy video filter video_srv ",
		"policy video filter video_srv6", "policy bulk filter backup", "unmatched", "inbound, not classified"} {
		if !strings.Contains(out, want) {
			t.Errorf("example output lacks %q:\n%s", want, out)
		}
	}
}
