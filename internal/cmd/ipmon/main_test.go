package ipmon

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sluice/internal/getopt"
	"sluice/internal/ipflog"
	"sluice/internal/packet"
	pt "sluice/internal/packet/packettest"
)

func TestGetopt(t *testing.T) {
	var seen []string
	opts, rest, err := getopt.Parse([]string{"-bf", "logout", "-P/dev/null", "-o", "NI", "-x", "out.txt", "-v"}, optstring)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		seen = append(seen, string(o.Flag)+"="+o.Arg)
	}
	want := "b= f=logout P=/dev/null o=NI x="
	if got := strings.Join(seen, " "); got != want {
		t.Errorf("options: got %q, want %q", got, want)
	}
	if len(rest) != 2 || rest[0] != "out.txt" {
		t.Errorf("operands: %q", rest)
	}
	for _, bad := range [][]string{{"-q"}, {"-f"}} {
		if _, err := parseArgs(bad); err == nil {
			t.Errorf("parseArgs(%q) accepted", bad)
		}
	}
	c, err := parseArgs([]string{"-N", "n", "-S", "s", "-a", "-O", "S", "-n", "-p", "-s", "-t", "-X", "-D", "-F", "-L", "local3"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.logs['I'] || !c.logs['N'] || c.logs['S'] || !c.fmt.Resolve || !c.fmt.PortNum || !c.fmt.Syslog ||
		!c.tail || !c.fmt.HexHeader || !c.daemon || !c.flush || c.facility != "local3" || c.natFile != "n" || c.stateFile != "s" {
		t.Errorf("parsed config: %+v", c)
	}
}

func writeLog(t *testing.T, path string) {
	t.Helper()
	lg := ipflog.NewDefault()
	pkt := pt.V4{Src: "2.2.2.2", Dst: "4.4.4.4", Proto: packet.ProtoUDP, Payload: pt.UDP(1, 53, []byte("abc"), false)}.Bytes()
	var in packet.Info
	if err := in.Parse(pkt, packet.ParseOptions{}); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 2; k++ {
		lg.Append(&ipflog.Entry{Time: time.Unix(86400+3661, 5000), Iface: "anon0", Rule: 0,
			Flags: ipflog.FRPass | ipflog.FRLog | ipflog.FRLogBody, Level: ipflog.NoLevel, Info: &in, Packet: pkt})
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lg.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestRunPrintsLog(t *testing.T) {
	dir := t.TempDir()
	logout := filepath.Join(dir, "logout")
	writeLog(t, logout)
	t.Setenv("TZ", "GMT")
	var out, errb bytes.Buffer
	pid := filepath.Join(dir, "pid")
	if rc := Main([]string{"-P", pid, "-bf", logout}, nil, &out, &errb); rc != 0 {
		t.Fatalf("exit %d: %s", rc, errb.String())
	}
	want := "missed 1 ipf log entries: 0 1\n" +
		"02/01/1970 01:01:01.000005 2x anon0 @0:1 p 2.2.2.2,1 -> 4.4.4.4,53 PR udp len 20 31 IN\n" +
		"61 62 63                                               abc\n"
	if out.String() != want {
		t.Errorf("\n got %q\nwant %q", out.String(), want)
	}
	if b, err := os.ReadFile(pid); err != nil || strings.TrimSpace(string(b)) == "" {
		t.Errorf("pid file: %q %v", b, err)
	}
	// Output file operand and -B binary copy.
	outFile, binFile := filepath.Join(dir, "out.txt"), filepath.Join(dir, "copy")
	out.Reset()
	if rc := Main([]string{"-f", logout, "-B", binFile, outFile}, nil, &out, &errb); rc != 0 {
		t.Fatalf("exit %d: %s", rc, errb.String())
	}
	b, _ := os.ReadFile(outFile)
	if out.Len() != 0 || !strings.Contains(string(b), "2x anon0 @0:1 p") {
		t.Errorf("output file %q, stdout %q", b, out.String())
	}
	orig, _ := os.ReadFile(logout)
	cp, _ := os.ReadFile(binFile)
	if !bytes.Equal(orig, cp) {
		t.Errorf("-B copy differs from the log")
	}
}

func TestRunErrors(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := Main([]string{"-f", filepath.Join(t.TempDir(), "missing")}, nil, &out, &errb); rc == 0 {
		t.Error("missing log file: exit 0")
	}
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte("not a log record, long enough to hold a header of sixty-four bytes..."), 0o644); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if rc := Main([]string{"-f", bad}, nil, &out, &errb); rc == 0 || !strings.Contains(errb.String(), "corrupt") {
		t.Errorf("corrupt log: exit %d, stderr %q", rc, errb.String())
	}
	if rc := Main([]string{"-Z"}, nil, &out, &errb); rc == 0 {
		t.Error("unknown option: exit 0")
	}
}

func TestRunNATAndStateLogs(t *testing.T) {
	dir := t.TempDir()
	natf, statef := filepath.Join(dir, "nat"), filepath.Join(dir, "state")
	nl, sl := ipflog.New(ipflog.Config{}), ipflog.New(ipflog.Config{})
	a := netip.MustParseAddr
	nl.AppendNAT(time.Unix(0, 0), &ipflog.NATLog{Action: ipflog.NATNew, Kind: ipflog.NATRdr, Proto: 6,
		OSrc: a("1.1.1.1"), OSrcPort: 80, NSrc: a("10.0.0.1"), NSrcPort: 8080, ODst: a("2.2.2.2"), ODstPort: 1025})
	sl.AppendState(time.Unix(0, 0), &ipflog.StateLog{Event: ipflog.StateNew, Proto: 17, Src: a("1.1.1.1"),
		Dst: a("2.2.2.2"), SrcPort: 53, DstPort: 53})
	for path, lg := range map[string]*ipflog.Log{natf: nl, statef: sl} {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lg.WriteTo(f); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	t.Setenv("TZ", "GMT")
	var out, errb bytes.Buffer
	if rc := Main([]string{"-N", natf, "-S", statef, "-P", "/dev/null"}, nil, &out, &errb); rc != 0 {
		t.Fatalf("exit %d: %s", rc, errb.String())
	}
	want := "missed 1 NAT log entries: 0 1\n" +
		"01/01/1970 00:00:00.000000 @1 NAT:NEW-RDR 1.1.1.1,80 <- -> 10.0.0.1,8080 [2.2.2.2,1025] tcp\n" +
		"missed 1 state log entries: 0 1\n" +
		"01/01/1970 00:00:00.000000 STATE:NEW 1.1.1.1,53 -> 2.2.2.2,53 PR udp\n"
	if out.String() != want {
		t.Errorf("\n got %q\nwant %q", out.String(), want)
	}
}
