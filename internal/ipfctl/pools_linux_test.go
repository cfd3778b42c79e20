package ipfctl

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice/internal/rules/ippool"
)

const storeConf = `table role = ipf type = tree number = 100 { 1.1.1.1/32; !2.2.0.0/16; 2.2.2.0/24; ::1/128; };
table role = nat type = hash name = web size = 7 seed = 3 { 10.1.1.1; 10.2.0.0/16; };
group-map out role = ipf number = 2010 { 2.2.2.2/32, group = 2020; 4.4.0.0/16, group = 2030; };
pool ipf/dstlist (name fwd; policy round-robin;) { nic0:1.1.1.1; 2.2.2.2; };
`

func parseConf(t *testing.T, src string) *ippool.File {
	t.Helper()
	f, err := ippool.Parse("store.conf", src)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestPoolStoreRoundTrip(t *testing.T) {
	st := NewPoolStore(filepath.Join(t.TempDir(), "pools"))
	f, err := st.Load()
	if err != nil || len(f.Tables) != 0 {
		t.Fatalf("Load of a new store = %v, %v; want no tables", f, err)
	}
	want := parseConf(t, storeConf)
	if err := st.Save(want); err != nil {
		t.Fatal(err)
	}
	got, err := st.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("stored tables print as\n%s\nwant\n%s", got, want)
	}
	if got.Tables[2].Type != ippool.GroupMap || !got.Tables[2].Out || got.Tables[3].Policy != ippool.PolicyRoundRobin {
		t.Errorf("table attributes lost: %+v %+v", got.Tables[2], got.Tables[3])
	}
	// the rename leaves no temporary files behind
	ents, _ := os.ReadDir(st.Dir())
	for _, e := range ents {
		if e.Name() != poolFile && e.Name() != "lock" {
			t.Errorf("stray file %s in the store", e.Name())
		}
	}
}

func TestPoolStoreCorrupt(t *testing.T) {
	dir := t.TempDir()
	st := NewPoolStore(dir)
	if err := os.WriteFile(filepath.Join(dir, poolFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Load(); err == nil || !strings.Contains(err.Error(), poolFile) {
		t.Errorf("Load of a corrupt store: %v, want an error naming the file", err)
	}
	// a table defined twice is refused too: it would not compile
	dup := parseConf(t, "table role = ipf type = tree number = 1 { 1.1.1.1; };\n")
	dup.Tables = append(dup.Tables, dup.Tables[0])
	if err := st.Save(dup); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Load(); err == nil {
		t.Errorf("Load of a store with a duplicate table succeeded")
	}
}

func TestUpdatePoolsWithoutDatapath(t *testing.T) {
	tmp := t.TempDir()
	b := NewKernelWithPools(filepath.Join(tmp, "no-bpffs"), filepath.Join(tmp, "pools"))
	defer b.Close()
	if err := b.UpdatePools(func(f *ippool.File) error {
		f.Tables = parseConf(t, storeConf).Tables
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	before, err := b.Pools()
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := b.UpdatePools(func(f *ippool.File) error {
		f.Tables = nil
		return boom
	}); !errors.Is(err, boom) {
		t.Errorf("UpdatePools returned %v, want the edit's error", err)
	}
	if err := b.UpdatePools(func(f *ippool.File) error {
		f.Tables = append(f.Tables, f.Tables[0])
		return nil
	}); err == nil {
		t.Errorf("UpdatePools accepted a table defined twice")
	}
	after, err := b.Pools()
	if err != nil {
		t.Fatal(err)
	}
	if after.String() != before.String() {
		t.Errorf("failed updates changed the store:\n%s\nwant\n%s", after, before)
	}
}
