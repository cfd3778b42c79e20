//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"sluice/internal/testutil"
	"sluice/internal/testutil/bpffs"
)

// memlock reads the kernel's memory figure of a map (its fdinfo).
func memlock(t *testing.T, m *ebpf.Map) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", m.FD()))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "memlock:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no memlock in the fdinfo of map %v", m)
	return 0
}

// TestPrivilegedSessionTableMemory checks what docs/kernel-memory.md says
// of the session tables: sessions, fast4 and fast6 are preallocated (a
// new session allocates none of its four entries), hostmaps is not, and
// the preallocated three take at most 100 MB together (95 MB measured on
// x86-64, Linux 6.18, since trust12); fast4dm, an array (allocated whole), at most 11 MB.
func TestPrivilegedSessionTableMemory(t *testing.T) {
	h := newHarness(t)
	var total uint64
	for name, m := range map[string]*ebpf.Map{"sessions": h.d.objs.Sessions, "fast4": h.d.objs.Fast4, "fast6": h.d.objs.Fast6, "hostmaps": h.d.objs.Hostmaps} {
		info, err := m.Info()
		if err != nil {
			t.Fatal(err)
		}
		pre := info.Flags&unix.BPF_F_NO_PREALLOC == 0
		n := memlock(t, m)
		t.Logf("%s: %d entries, %d bytes, preallocated %v", name, info.MaxEntries, n, pre)
		if pre != (name != "hostmaps") {
			t.Errorf("%s: preallocated %v, want %v", name, pre, name != "hostmaps")
		}
		if pre {
			total += n
		}
	}
	if total > 100<<20 {
		t.Errorf("the preallocated session tables take %d bytes, over the 100 MB docs/kernel-memory.md gives", total)
	}
	dm := memlock(t, h.d.objs.Fast4dm)
	t.Logf("fast4dm: %d slots, %d bytes", dmSlots, dm)
	if dm > 11<<20 {
		t.Errorf("fast4dm takes %d bytes, over the 11 MB docs/kernel-memory.md gives", dm)
	}
}

// TestPrivilegedOldMapsRefused: maps pinned by a datapath of another
// layout (an older Sluice's session tables, allocated entry by entry)
// make the load fail with an error that says what to do, and are left
// as they were.
func TestPrivilegedOldMapsRefused(t *testing.T) {
	testutil.RequireRoot(t)
	dir := filepath.Join(bpffs.Mount(t), "nat")
	old, err := Load(Options{PinDir: dir, alloc: allocOnDemand})
	if err != nil {
		t.Fatalf("Load: %+v", err)
	}
	old.objs.Close()
	_, err = Load(Options{PinDir: dir})
	if !errors.Is(err, ebpf.ErrMapIncompatible) || !strings.Contains(err.Error(), "another layout") {
		t.Fatalf("loading over an older layout's maps: %v, want an incompatible-maps error saying so", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sessions")); err != nil {
		t.Errorf("the older datapath's session table: %v", err)
	}
}
