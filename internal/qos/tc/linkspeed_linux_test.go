//go:build linux

package tc

import (
	"testing"

	"github.com/vishvananda/netlink"

	"sluice/internal/testutil/netnstest"
)

func TestPrivilegedLinkSpeedInNetns(t *testing.T) {
	var got uint64
	err := netnstest.Do(netnstest.New(t), func() error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "ls0"}, PeerName: "ls1"}); err != nil {
			return err
		}
		got = LinkSpeed("ls0")
		if LinkSpeed("nosuch0") != 0 {
			t.Error("LinkSpeed of a missing device is not 0")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(10e9); got != want { // veth reports 10000 Mb/s
		t.Errorf("veth speed: got %d, want %d", got, want)
	}
}
