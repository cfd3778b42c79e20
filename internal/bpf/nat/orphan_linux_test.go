//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"fmt"
	"testing"

	"github.com/cilium/ebpf"
)

// TestPrivilegedReplyShadowEnding: a new session whose reply key is an
// older session's moves the older reply entry aside (shadow) while the
// older session is ending on another CPU (its forward entry marked by
// its timer or a flush, which read the reply's key before the move). The
// mover must end its copy itself: the ender does not know the copy's
// key, and a copy left would be an entry nothing ends (it translates the
// old session's replies when a lookup walks the shadows) with the shadow
// count one too high for good (nat18, found by reading). The other CPU is
// staged: the older session's forward entry is marked from user space
// before the new session's packet; a flush then ends what is left.
func TestPrivilegedReplyShadowEnding(t *testing.T) {
	const rules = "map * 10.0.0.0/24 -> 1.1.1.1/32\n"
	h := newHarness(t)
	// A: 10.0.0.1:1000 -> 2.2.2.2:53 out on nic1 as 1.1.1.1:1000, a
	// reply in on nic1 binds its reply entry there; B: 10.0.0.2:1000
	// out on nic2 as 1.1.1.1:1000 too (no clash: A's reply entry is
	// another interface's), so B's reply key is A's
	var fwdA natNatKey
	var seqA uint64
	if err := h.do(func() error {
		if _, err := h.load(rules); err != nil {
			return err
		}
		for _, p := range []struct {
			out   bool
			iface string
			b     []byte
		}{
			{true, "nic1", udp4("10.0.0.1", "2.2.2.2", 1000, 53)},
			{false, "nic1", udp4("2.2.2.2", "1.1.1.1", 53, 1000)},
		} {
			if ret, _, err := h.run(p.out, p.iface, p.b); err != nil || ret != VerdictNext {
				return fmt.Errorf("A's packets: verdict %d, %v", ret, err)
			}
		}
		var k natNatKey
		var v natNatSess
		n := 0
		it := h.d.objs.Sessions.Iterate()
		for it.Next(&k, &v) {
			n++
			if v.W == 0 {
				fwdA, seqA = k, v.Seq
			}
		}
		if n != 2 || seqA == 0 {
			return fmt.Errorf("A: %d entries, forward seq %d", n, seqA)
		}
		// the ender's mark
		if err := h.d.objs.Sessions.Lookup(&fwdA, &v); err != nil {
			return err
		}
		v.Seq = 0
		if err := h.d.objs.Sessions.Update(&fwdA, &v, ebpf.UpdateExist); err != nil {
			return err
		}
		ret, got, err := h.run(true, "nic2", udp4("10.0.0.2", "2.2.2.2", 1000, 53))
		if err != nil {
			return err
		}
		if ret != VerdictNext || len(got) < 28 || got[12] != 1 || got[15] != 1 || got[20] != 0x03 || got[21] != 0xe8 {
			return fmt.Errorf("B: verdict %d, %x: not mapped to 1.1.1.1:1000 (the test needs B's reply key to be A's)", ret, got)
		}
		// the ender goes on (sess_delete after its mark): the flush
		// plays it, A's entry given its seq back so that the flush
		// ends it, and B with it
		v.Seq = seqA
		return h.d.objs.Sessions.Update(&fwdA, &v, ebpf.UpdateExist)
	}); err != nil {
		t.Fatal(err)
	}
	if n := h.d.cfg(cfgShadows); n != 0 {
		t.Errorf("%d shadow entries counted after B was made, want none (A's reply was ended, not moved)", n)
	}
	if _, err := h.d.FlushSessions(); err != nil {
		t.Fatal(err)
	}
	assertEmpty(t, h, "after A and B ended")
}
