package ipfstat

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"

	"sluice/internal/bpf"
	"sluice/internal/rules/ipf"
	"sluice/internal/testutil/bpffs"
)

// frame builds an Ethernet/IPv4/TCP frame.
func frame(src, dst [4]byte, sport, dport uint16, flags uint8) []byte {
	b := make([]byte, 14+20+20)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 6
	binary.BigEndian.PutUint16(ip[2:], 40)
	copy(ip[12:], src[:])
	copy(ip[16:], dst[:])
	tcp := ip[20:]
	binary.BigEndian.PutUint16(tcp[0:], sport)
	binary.BigEndian.PutUint16(tcp[2:], dport)
	binary.BigEndian.PutUint32(tcp[4:], 1000)
	tcp[12], tcp[13] = 5<<4, flags
	binary.BigEndian.PutUint16(tcp[14:], 4096)
	return b
}

func TestPrivilegedIpfstat(t *testing.T) {
	mnt := bpffs.Mount(t)
	dir := filepath.Join(mnt, "sluice")
	t.Setenv("SLUICE_BPF_DIR", dir)

	d, err := bpf.Load(bpf.Options{PinDir: dir})
	if err != nil {
		t.Fatalf("%+v", err)
	}
	defer d.Remove()
	rules, err := ipf.Parse("t.conf", []byte(`block in all
pass in quick proto tcp from any to any port = 22 flags S/SA keep state
count in proto tcp all
pass in proto udp all head 10
block in proto udp from 10.0.0.0/8 to any group 10
`), ipf.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	im, err := bpf.Compile(rules, bpf.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.LoadRules(im, bpf.Active); err != nil {
		t.Fatal(err)
	}
	for _, fr := range [][]byte{
		frame([4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}, 1025, 22, 0x02),
		frame([4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}, 1025, 23, 0x02),
	} {
		if _, _, err := d.Run(false, fr); err != nil {
			t.Fatal(err)
		}
	}

	out := func(args ...string) (string, string) {
		var o, e bytes.Buffer
		if rc := Main(args, &o, &e); rc != 0 {
			t.Fatalf("ipfstat %v: exit %d: %s", args, rc, e.String())
		}
		return o.String(), e.String()
	}
	got, _ := out("-hin")
	want := "2 @1 block in all\n1 @2 pass in quick proto tcp from any to any port = 22 flags S/SA keep state\n0 @3 pass in proto udp from any to any head 10\n# Group 10\n0 @1 block in inet proto udp from 10.0.0.0/8 to any group 10\n"
	if got != want {
		t.Errorf("ipfstat -hin:\ngot:\n%s\nwant:\n%s", got, want)
	}
	_, e := out("-o")
	if e != "# empty list for ipfilter(out)\n" {
		t.Errorf("ipfstat -o stderr: got %q", e)
	}
	got, _ = out("-ai")
	if !strings.HasPrefix(got, "2 80 count in proto tcp from any to any\n") {
		t.Errorf("ipfstat -ai: got %q", got)
	}
	got, _ = out()
	if !strings.Contains(got, " input packets:\t\tblocked 1 passed 1 nomatch 0 counted 2 short 0\n") {
		t.Errorf("ipfstat: got\n%s", got)
	}
	got, _ = out("-s")
	if !strings.Contains(got, "IP states added:\n\t1 TCP\n") {
		t.Errorf("ipfstat -s: got\n%s", got)
	}
	got, _ = out("-sl")
	if !strings.HasPrefix(got, "10.0.0.1 -> 10.0.0.2 pass 0x") || !strings.Contains(got, "1025 -> 22") {
		t.Errorf("ipfstat -sl: got\n%s", got)
	}
	got, _ = out("-g")
	if !strings.Contains(got, "ipf groups (set 0):\n10\n") {
		t.Errorf("ipfstat -g: got\n%s", got)
	}
}
