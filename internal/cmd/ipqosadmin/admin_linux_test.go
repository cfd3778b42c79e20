//go:build linux

package ipqosadmin

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"sluice/internal/rules/ipqos"
	"sluice/internal/testutil/bpffs"
	"sluice/internal/testutil/netnstest"
)

// TestPrivilegedAdminLifecycle drives ipqosadmin through enable, load,
// state, showconfig, showstats, reset and unload, inside a fresh network
// namespace (holding a veth pair) and on a private bpffs.
func TestPrivilegedAdminLifecycle(t *testing.T) {
	mnt := bpffs.Mount(t)
	dir := filepath.Join(mnt, "sluice-qos")

	conf := `# voice goes EF
filter voice {
    udp
    dstport 5060
}
policy ef {
    uses voice
    dscp 46
    max 50%
}
adapter ad0 {
    uses ef
}
`
	steps := []struct {
		name  string
		stdin string
		args  []string
		rc    int
		out   string // substring expected on stdout
	}{
		{"state before", "", []string{"-state"}, 0, "disabled"},
		{"load", conf, []string{"-load", "-f", "-", "-verbose"}, 0, "adapter ad0: htb"},
		{"state loaded", "", []string{"-state"}, 3, "enabled, filtering"},
		{"state silent", "", []string{"-state", "-s"}, 3, ""},
		{"showconfig", "", []string{"-showconfig"}, 0, normalized(t, conf)},
		{"showstats", "", []string{"-showstats", "ad0/ef"}, 0, "Filter: voice packets 0"},
		{"reset", "", []string{"-showstats", "-reset"}, 0, ""},
		{"loglevel", "", []string{"-loglevel", "info"}, 0, ""},
		{"unload", "", []string{"-unload"}, 0, "adapter ad0: detached"},
		{"state unloaded", "", []string{"-state"}, 2, "enabled, not filtering"},
		{"showconfig none", "", []string{"-showconfig"}, 1, ""},
	}
	err := netnstest.Do(netnstest.New(t), func() error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "ad0"}, PeerName: "ad1"}); err != nil {
			return err
		}
		for _, s := range steps {
			rc, out, errs := runMain(s.stdin, append(s.args, "-pindir", dir)...)
			if rc != s.rc || !strings.Contains(out, s.out) {
				return fmt.Errorf("%s: exit %d (want %d), stdout:\n%s\nstderr:\n%s(want stdout containing %q)", s.name, rc, s.rc, out, errs, s.out)
			}
			if s.name == "state silent" && out != "" {
				return fmt.Errorf("-state -s printed %q", out)
			}
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

func normalized(t *testing.T, conf string) string {
	cfg, err := ipqos.Parse("t", []byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	return ipqos.Format(cfg)
}
