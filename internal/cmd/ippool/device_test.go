package ippool

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice/internal/ipfctl"
	"sluice/internal/rules/ippool"
)

// memDevice is an in-memory Device that, like the kernel one, keeps the
// old tables when an edit fails.
type memDevice struct {
	f *ippool.File
}

func (d *memDevice) Pools() (*ippool.File, error) {
	if d.f == nil {
		return &ippool.File{}, nil
	}
	return d.f, nil
}

func (d *memDevice) UpdatePools(edit func(*ippool.File) error) error {
	cur := &ippool.File{}
	if d.f != nil {
		// a deep enough copy: edits replace slices and append entries
		for _, t := range d.f.Tables {
			c := *t
			c.Entries = append([]ippool.Entry(nil), t.Entries...)
			cur.Tables = append(cur.Tables, &c)
		}
	}
	if err := edit(cur); err != nil {
		return err
	}
	d.f = cur
	return nil
}

func runDev(t *testing.T, d ipfctl.PoolDevice, args ...string) (int, string, string) {
	t.Helper()
	var o, e bytes.Buffer
	code := (&Command{Device: d, Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e}).Run(args)
	return code, o.String(), e.String()
}

func mustDev(t *testing.T, d ipfctl.PoolDevice, args ...string) string {
	t.Helper()
	code, o, e := runDev(t, d, args...)
	if code != 0 {
		t.Fatalf("ippool %s: exit %d: %s", strings.Join(args, " "), code, e)
	}
	return o
}

func writeConf(t *testing.T, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ippool.conf")
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const tree100 = "table role=ipf type=tree number=100\n\t{ 1.1.1.1/32; ! 2.2.0.0/16; 2.2.2.0/24; };\n"
const hash200 = "table role=ipf type=hash number=200 size=3\n\t{ 10.1.1.1/32; 10.2.0.0/16; };\n"

func TestDeviceCommands(t *testing.T) {
	d := &memDevice{}
	conf := writeConf(t, "table role = ipf type = tree number = 100 { 1.1.1.1/32; !2.2.0.0/16; 2.2.2.0/24; };\ntable role = ipf type = hash number = 200 { 10.1.1.1; 10.2.0.0/16; };\n")
	mustDev(t, d, "-f", conf)
	if got := mustDev(t, d, "-l"); got != tree100+hash200 {
		t.Errorf("-l:\n%s\nwant:\n%s", got, tree100+hash200)
	}
	if got := mustDev(t, d, "-l", "-t", "hash"); got != hash200 {
		t.Errorf("-l -t hash:\n%s", got)
	}
	if got := mustDev(t, d, "-l", "-m", "100", "-o", "ipf"); got != tree100 {
		t.Errorf("-l -m 100:\n%s", got)
	}
	if got := mustDev(t, d, "-l", "-o", "nat"); got != "" {
		t.Errorf("-l -o nat lists ipf tables:\n%s", got)
	}
	// loading the file again replaces its tables instead of doubling them
	mustDev(t, d, "-f", conf)
	if got := mustDev(t, d, "-l"); got != tree100+hash200 {
		t.Errorf("-l after reloading:\n%s", got)
	}

	mustDev(t, d, "-a", "-m", "100", "-i", "3.3.3.9/255.255.255.0")
	mustDev(t, d, "-r", "-m", "200", "-i", "10.1.1.1")
	want := "table role=ipf type=tree number=100\n\t{ 1.1.1.1/32; ! 2.2.0.0/16; 2.2.2.0/24; 3.3.3.0/24; };\n" +
		"table role=ipf type=hash number=200 size=3\n\t{ 10.2.0.0/16; };\n"
	if got := mustDev(t, d, "-l"); got != want {
		t.Errorf("-l after -a and -r:\n%s\nwant:\n%s", got, want)
	}
	for _, c := range []struct {
		args []string
		why  string
	}{
		{[]string{"-a", "-m", "100", "-i", "3.3.3.0/24"}, "already in"},
		{[]string{"-r", "-m", "100", "-i", "9.9.9.9"}, "not in"},
		{[]string{"-a", "-m", "999", "-i", "9.9.9.9"}, "no such table"},
		{[]string{"-a", "-m", "100", "-i", "9.9.9.9/33"}, "netmask"},
		{[]string{"-A", "-m", "100", "-t", "tree"}, "already exists"},
		{[]string{"-R", "-m", "999"}, "no such table"},
	} {
		code, _, e := runDev(t, d, c.args...)
		if code == 0 || !strings.Contains(e, c.why) {
			t.Errorf("ippool %v: exit %d, stderr %q; want failure saying %q", c.args, code, e, c.why)
		}
	}
	if got := mustDev(t, d, "-l"); got != want {
		t.Errorf("failed commands changed the tables:\n%s", got)
	}

	mustDev(t, d, "-A", "-m", "web", "-t", "hash", "-S", "7")
	if got, w := mustDev(t, d, "-l", "-m", "web"), "table role=ipf type=hash name=web size=1 seed=7\n\t{; };\n"; got != w {
		t.Errorf("-l of a new hash table:\n%q\nwant\n%q", got, w)
	}
	mustDev(t, d, "-a", "-m", "web", "-i", "2001:db8::1/64")
	wantStats := "1\taddress pools\n4\taddress pool nodes\n2\thash tables\n2\thash table nodes\n0\thash table no memory \n" +
		"0\tdestination lists\n0\tdestination list nodes\n0\tdestination list no memory\n"
	if got := mustDev(t, d, "-s"); got != wantStats {
		t.Errorf("-s:\n%s\nwant:\n%s", got, wantStats)
	}
	mustDev(t, d, "-R", "-m", "web")
	if got := mustDev(t, d, "-l"); got != want {
		t.Errorf("-l after -R:\n%s", got)
	}
	mustDev(t, d, "-f", conf, "-u")
	if got := mustDev(t, d, "-l"); got != "" {
		t.Errorf("-l after -f -u:\n%s", got)
	}
	mustDev(t, d, "-f", conf)
	if got := mustDev(t, d, "-F", "-v"); got != "2 objects flushed\n" {
		t.Errorf("-F -v: %q", got)
	}
	if got := mustDev(t, d, "-l"); got != "" {
		t.Errorf("-l after -F:\n%s", got)
	}
}

func TestDeviceBadFileChangesNothing(t *testing.T) {
	d := &memDevice{}
	good := writeConf(t, "table role = ipf type = tree number = 100 { 1.1.1.1/32; !2.2.0.0/16; 2.2.2.0/24; };\n")
	mustDev(t, d, "-f", good)
	for _, src := range []string{
		"table role = ipf type = tree number = 100 { 5.5.5.5; };\ntable role = ipf type = tree number = 7 { 1.2.3.4/40; };\n",
		"table role = ipf type = tree number = 5 { 1.1.1.1; };\ntable role = ipf type = tree number = 5 { 2.2.2.2; };\n",
	} {
		code, _, e := runDev(t, d, "-f", writeConf(t, src))
		if code == 0 || !strings.Contains(e, "no tables changed") {
			t.Errorf("bad file %q: exit %d, stderr %q", src, code, e)
		}
		if got := mustDev(t, d, "-l"); got != tree100 {
			t.Errorf("bad file changed the tables:\n%s", got)
		}
	}
}

func TestNoDevice(t *testing.T) {
	conf := writeConf(t, "table role = ipf type = tree number = 100 { 1.1.1.1/32; };\n")
	for _, args := range [][]string{{"-f", conf}, {"-l"}, {"-a", "-m", "1", "-i", "1.2.3.4"}} {
		code, _, e := runDev(t, nil, args...)
		if code == 0 || !strings.Contains(e, "no kernel lookup device") {
			t.Errorf("ippool %v without a device: exit %d, stderr %q", args, code, e)
		}
	}
	if code, _, e := runDev(t, nil, "-n", "-f", conf); code != 0 {
		t.Errorf("ippool -n -f without a device: exit %d, %s", code, e)
	}
}

// TestTwoCommandsRefused: `ippool -F -f new.conf` (as one would write
// `ipf -Fa -f`) ran the flush, ignored -f and exited 0, leaving every
// table empty and the file unread; the original does the same with only a
// getopt warning. Any two commands on one line are refused before anything
// changes.
func TestTwoCommandsRefused(t *testing.T) {
	conf := writeConf(t, tree100)
	newConf := writeConf(t, hash200)
	for _, args := range [][]string{
		{"-F", "-f", newConf}, {"-f", newConf, "-F"}, {"-l", "-F"}, {"-F", "-A", "-m", "7"},
		{"-a", "-m", "100", "-i", "9.9.9.9", "-f", newConf},
	} {
		d := &memDevice{}
		mustDev(t, d, "-f", conf)
		code, _, e := runDev(t, d, args...)
		if code != 2 || !strings.Contains(e, "one command at a time") {
			t.Errorf("ippool %s: exit %d, stderr %q; want 2 and \"one command at a time\"", strings.Join(args, " "), code, e)
		}
		if got := mustDev(t, d, "-l"); got != tree100 {
			t.Errorf("ippool %s changed the tables:\n%s\nwant:\n%s", strings.Join(args, " "), got, tree100)
		}
	}
	// -R after -f is -f's "no name resolution", not a second command.
	d := &memDevice{}
	mustDev(t, d, "-f", conf, "-R")
	if got := mustDev(t, d, "-l"); got != tree100 {
		t.Errorf("-f -R:\n%s\nwant:\n%s", got, tree100)
	}
}
