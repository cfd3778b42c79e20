//go:build linux

package config

import (
	"context"
	"testing"

	"github.com/google/nftables"

	"sluice/internal/bench/topo"
	"sluice/internal/testutil/topotest"
)

// tablesIn lists the nftables tables of a host's namespace.
func tablesIn(t *testing.T, tp *topo.Topo, r topo.Role) map[string]int {
	t.Helper()
	fd, err := tp.NSHandle(r)
	if err != nil {
		t.Fatal(err)
	}
	c, err := nftables.New(nftables.WithNetNSFd(fd))
	if err != nil {
		t.Fatal(err)
	}
	ts, err := c.ListTables()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, tb := range ts {
		chains, err := c.ListChainsOfTableFamily(tb.Family)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ch := range chains {
			if ch.Table.Name != tb.Name {
				continue
			}
			rs, err := c.GetRules(tb, ch)
			if err != nil {
				t.Fatal(err)
			}
			n += len(rs)
		}
		out[tb.Name] = n
	}
	return out
}

func TestPrivilegedNFTApply(t *testing.T) {
	tp := topotest.New(t, "slbcfg")
	for _, tc := range []struct {
		spec  NFTSpec
		rules int
	}{
		{NFTSpec{}, 0},
		{NFTSpec{Stateful: true}, 8},
		{NFTSpec{Stateless: true, NoMatch: 1000}, 1006},
	} {
		n := NewNFT(tc.spec)
		if err := n.Apply(context.Background(), tp.Host(topo.SUT)); err != nil {
			t.Fatalf("%+v: %v", tc.spec, err)
		}
		if got := tablesIn(t, tp, topo.SUT); len(got) != 1 || got[NFTTable] != tc.rules {
			t.Errorf("%+v: tables in SUT %v, want %s with %d rules", tc.spec, got, NFTTable, tc.rules)
		}
		if got := tablesIn(t, tp, topo.Peer); len(got) != 0 {
			t.Errorf("tables in peer: %v, want none", got)
		}
		// Traffic still flows through the accepting rule sets.
		if _, err := topotest.ConnectTOS(t, tp); err != nil {
			t.Errorf("%+v: %v", tc.spec, err)
		}
		if err := n.Remove(); err != nil {
			t.Fatal(err)
		}
		if got := tablesIn(t, tp, topo.SUT); len(got) != 0 {
			t.Errorf("after Remove: tables %v", got)
		}
	}
}

func TestPrivilegedNFTDSCP(t *testing.T) {
	tp := topotest.New(t, "slbcfg")
	if tos, err := topotest.ConnectTOS(t, tp); err != nil || tos>>2 != 0 {
		t.Fatalf("without marking: TOS %#x, %v; want DSCP 0", tos, err)
	}
	n := NewNFT(NFTSpec{Mark: true, DSCP: 46})
	if err := n.Apply(context.Background(), tp.Host(topo.SUT)); err != nil {
		t.Fatal(err)
	}
	defer n.Remove()
	tos, err := topotest.ConnectTOS(t, tp)
	if err != nil {
		t.Fatal(err)
	}
	if tos>>2 != 46 {
		t.Errorf("DSCP on the wire: got %d, want 46", tos>>2)
	}
}
