package nat

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"sluice/internal/rules/ipnat"
)

// TestCompileResolvesEachInterfaceOnce: a big ipnat.conf on a few
// interfaces asks the host for each name once (net.InterfaceByName reads
// every interface), and every rule still gets its name's index, or
// ifNever for a name the host does not have.
func TestCompileResolvesEachInterfaceOnce(t *testing.T) {
	var b strings.Builder
	for i := range 300 {
		nic := []string{"eth0", "eth1", "gone0"}[i%3]
		fmt.Fprintf(&b, "map %s 10.%d.%d.0/24 -> 192.0.2.%d/32\n", nic, i/256, i%256, i%250+1)
	}
	file, err := ipnat.Parse("many.nat", b.String(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	im, err := Compile(file.Rules, CompileOptions{File: "many.nat", Ifindex: func(name string) (int, bool) {
		calls[name]++
		switch name {
		case "eth0":
			return 7, true
		case "eth1":
			return 9, true
		}
		return 0, false
	}})
	if err != nil {
		t.Fatal(err)
	}
	for name, n := range calls {
		if n != 1 {
			t.Errorf("%s looked up %d times", name, n)
		}
	}
	if len(calls) != 3 || len(im.ifaces) != 3 {
		t.Errorf("lookups %v, image names %v", calls, im.ifaces)
	}
	want := []uint32{7, 9, ifNever}
	for i, r := range im.rules {
		if r.Outif != want[i%3] && r.Inif != want[i%3] {
			t.Fatalf("rule %d: in %d out %d, want %d", i, r.Inif, r.Outif, want[i%3])
		}
	}
}
