//go:build linux

package tc

import (
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"sluice/internal/testutil"
)

func TestPrivilegedLinkSpeedInNetns(t *testing.T) {
	testutil.RequireRoot(t)
	errc := make(chan error, 1)
	var got uint64
	go func() {
		// The thread is left in the new namespace and discarded on exit.
		runtime.LockOSThread()
		ns, err := netns.New()
		if err != nil {
			errc <- err
			return
		}
		defer ns.Close()
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "ls0"}, PeerName: "ls1"}); err != nil {
			errc <- err
			return
		}
		got = LinkSpeed("ls0")
		if LinkSpeed("nosuch0") != 0 {
			t.Error("LinkSpeed of a missing device is not 0")
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if want := uint64(10e9); got != want { // veth reports 10000 Mb/s
		t.Errorf("veth speed: got %d, want %d", got, want)
	}
}
