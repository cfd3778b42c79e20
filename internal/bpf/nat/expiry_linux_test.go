//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"testing"
	"time"

	"sluice/internal/packet/packettest"
)

func udpOut(src string, sport uint16) []byte {
	return packettest.V4{Src: src, Dst: "2.2.2.2", Proto: 17, Payload: packettest.UDP(sport, 53, []byte("q"), false)}.Bytes()
}

// TestPrivilegedSessionExpiry checks that the kernel ends sessions by
// itself when their lifetime (here `age 1/1`: one second) has passed with
// no packet, that packets keep a session alive, and that the host map
// entries go with the sessions. About 4 s.
func TestPrivilegedSessionExpiry(t *testing.T) {
	h := newHarness(t)
	if err := h.d.SetIPFTestMode(false); err != nil {
		t.Fatal(err)
	}
	defer h.d.SetIPFTestMode(true)
	count := func() int {
		t.Helper()
		ss, err := h.d.Sessions()
		if err != nil {
			t.Fatal(err)
		}
		return len(ss)
	}
	err := h.do(func() error {
		if _, err := h.load("map nic0 10.0.0.0/24 -> 1.1.1.0/24 age 1/1\n"); err != nil {
			return err
		}
		// a session the kernel refused for want of a timer (NoTimer:
		// its allocation failed, in bursts) is asked for again
		for _, sp := range []uint16{1000, 1001} {
			for try := 1; ; try++ {
				ret, _, err := h.run(true, "nic0", udpOut("10.0.0.1", sp))
				if err != nil {
					return err
				}
				st, err := h.d.Stats()
				if err != nil {
					return err
				}
				if ret == VerdictNext || st.NoTimer < uint64(try) || try == 10 {
					if ret != VerdictNext {
						t.Errorf("first packet: verdict %d, %d sessions refused for want of a timer", ret, st.NoTimer)
					}
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
		// the flow from port 1001 keeps sending for 2 s; 1000 stops
		for i := 0; i < 8; i++ {
			time.Sleep(250 * time.Millisecond)
			if _, _, err := h.run(true, "nic0", udpOut("10.0.0.1", 1001)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ss, err := h.d.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 1 || ss[0].OSPort != 1001 {
		t.Errorf("after 2 s: %d sessions %+v, want only the one that kept sending", len(ss), ss)
	}
	deadline := time.Now().Add(4 * time.Second)
	for count() != 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := count(); n != 0 {
		t.Fatalf("%d sessions still there 4 s after the last packet, with a lifetime of 1 s", n)
	}
	st, err := h.d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Expired != 2 || st.Active != 0 {
		t.Errorf("expired %d, active %d: want 2 and 0", st.Expired, st.Active)
	}
	hs, err := h.d.Hostmaps()
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 0 {
		t.Errorf("host map entries left after their sessions ended: %+v", hs)
	}
}

// TestPrivilegedTableFull fills the session table (nat_table_max 3): a
// packet that needs a new session is then dropped and counted, as
// IPFilter blocks it; existing sessions keep working; a flush makes room.
func TestPrivilegedTableFull(t *testing.T) {
	h := newHarness(t)
	tun := h.d.Tunables()
	defer h.d.SetTunables(tun)
	small := tun
	small.TableMax = 3
	if err := h.d.SetTunables(small); err != nil {
		t.Fatal(err)
	}
	err := h.do(func() error {
		if _, err := h.load("map nic0 10.0.0.0/24 -> 1.1.1.1/32 portmap udp 2000:3000 sequential\n"); err != nil {
			return err
		}
		for sp := uint16(1000); sp < 1003; sp++ {
			if ret, _, err := h.run(true, "nic0", udpOut("10.0.0.1", sp)); err != nil || ret != VerdictNext {
				t.Errorf("session %d: %d %v", sp, ret, err)
			}
		}
		if ret, _, err := h.run(true, "nic0", udpOut("10.0.0.1", 1003)); err != nil || ret != VerdictShot {
			t.Errorf("a fourth session with nat_table_max 3: verdict %d (%v), want dropped", ret, err)
		}
		if ret, _, err := h.run(true, "nic0", udpOut("10.0.0.1", 1001)); err != nil || ret != VerdictNext {
			t.Errorf("an existing session with the table full: %d %v", ret, err)
		}
		st, err := h.d.Stats()
		if err != nil {
			return err
		}
		if st.Side[dirOut].TableMax != 1 || st.Side[dirOut].BadNAT != 1 || st.Active != 3 {
			t.Errorf("table max reached %d, bad nat %d, active %d: want 1, 1, 3", st.Side[dirOut].TableMax, st.Side[dirOut].BadNAT, st.Active)
		}
		if n, err := h.d.FlushSessions(); err != nil || n != 3 {
			t.Errorf("flush: %d %v, want 3", n, err)
		}
		if ret, _, err := h.run(true, "nic0", udpOut("10.0.0.1", 1003)); err != nil || ret != VerdictNext {
			t.Errorf("a new session after the flush: %d %v", ret, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
