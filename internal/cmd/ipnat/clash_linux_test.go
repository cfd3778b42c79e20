//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package ipnat

import (
	"strconv"
	"strings"
	"testing"
)

// clashConns is how many connections TestPrivilegedNATPortmapClash makes
// from one client port range to one server port: more than the 252 ports
// `portmap tcp/udp auto` gives each host of a /24 (64 512 / 256), so that
// by the pigeonhole principle some of them want a port a session still
// holds (a closed TCP session keeps it 240 s).
const clashConns = 300

// TestPrivilegedNATPortmapClash: the masquerade TestNATCost measures
// through (costNAT, the bench's sluice-nat-map's two rules) carries many
// short connections from one client to one server port, as netperf's
// control connections to port 12865 are. `portmap tcp/udp auto` picks
// the port from the client's port (mod 252 here) and, with 0/32, tries
// that one only (IPFilter's ipf_nat_newmap, the engine, the kernel: the
// real ipftest agrees); a clash with a session still held leaves the SYN
// untranslated (BadNAT), again at every retransmission, for the 240 s
// the old session lives: TestNATCost's stalled netperf runs (session 9),
// whose rule file was the portmap line alone. The second rule of the
// pair takes such a connection with its own port. The test also pins
// that one-rule behaviour down, so that the first half is known to have
// met clashes.
func TestPrivilegedNATPortmapClash(t *testing.T) {
	t.Run("pair", func(t *testing.T) {
		if want := "map gs0 192.168.77.0/24 -> 0/32\n"; !strings.HasSuffix(costNAT, want) {
			t.Fatalf("costNAT (the bench's rules here) does not end with %q:\n%s", want, costNAT)
		}
		w := newGW(t)
		w.serve(w.s, gwS4, gwTCP, 0)
		w.mustIPNAT("-f", w.file("cost.nat", costNAT))
		for i := 0; i < clashConns; i++ {
			c, err := w.dial(w.c, gwS4, gwTCP)
			if err != nil {
				st := w.natStats()
				t.Fatalf("connection %d of %d: %v (NAT outbound: %d bad, %d searched out)", i+1, clashConns, err,
					st.Side[1].BadNAT, st.Side[1].Wrap)
			}
			c.Close()
		}
		st := w.natStats()
		if st.Side[1].BadNAT != 0 {
			t.Errorf("NAT refused %d packets", st.Side[1].BadNAT)
		}
		// the clashes happened and the second rule took them: sessions
		// whose port is the client's own
		kept := 0
		for _, l := range w.sessions() {
			f := strings.Fields(l)
			// (auto's ports for 192.168.77.2 are 1528-1779, the
			// client's own from its ephemeral range)
			if len(f) >= 7 && f[0] == "MAP" && f[2] == f[6] {
				if p, err := strconv.Atoi(f[2]); err == nil && p > 1779 {
					kept++
				}
			}
		}
		if kept == 0 {
			t.Errorf("no session kept its port: no connection met a clash, the test proves nothing")
		}
		t.Logf("%d connections, %d by the second rule; %d sessions made without a timer (the sweeper set %d, ended %d)",
			clashConns, kept, st.NoTimer, st.SweepArmed, st.SweepEnded)
	})
	t.Run("portmap-alone", func(t *testing.T) {
		w := newGW(t)
		w.serve(w.s, gwS4, gwTCP, 0)
		w.mustIPNAT("-f", w.file("auto.nat", "map gs0 192.168.77.0/24 -> 0/32 portmap tcp/udp auto\n"))
		for i := 0; i < clashConns; i++ {
			c, err := w.dial(w.c, gwS4, gwTCP)
			if err == nil {
				c.Close()
				continue
			}
			if i < 1 {
				t.Fatalf("the first connection failed: %v", err)
			}
			if st := w.natStats(); st.Side[1].BadNAT == 0 {
				t.Fatalf("connection %d failed (%v) with no SYN refused by NAT", i+1, err)
			}
			t.Logf("connection %d of one port's 252 met a clash: %v", i+1, err)
			return
		}
		t.Errorf("%d connections with one try at one of 252 ports each: no clash", clashConns)
	})
}
