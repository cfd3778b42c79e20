//go:build linux

package conformance

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"sluice/internal/bpf"
	"sluice/internal/rules/ipf"
	"sluice/internal/testutil"
	"sluice/internal/testutil/bpffs"
)

// TestPrivilegedKitBesideLiveFilter runs kit cases of ipf with the
// environment pointing at a live filter (a datapath with rules, pinned in
// a private bpffs, as the host's would be in /sys/fs/bpf/sluice): ipf -n
// run there prints what would change, and the kit must pass all the same,
// since its driver runs the commands offline (OfflineEnv).
func TestPrivilegedKitBesideLiveFilter(t *testing.T) {
	testutil.RequireRoot(t)
	h := getHarness(t)
	bin := h.built["ipf"]
	if bin == "" {
		t.Fatalf("cmd/ipf did not build: %s", h.buildErr["ipf"])
	}
	dir := filepath.Join(bpffs.Mount(t), "sluice")
	d, err := bpf.Load(bpf.Options{PinDir: dir})
	if err != nil {
		testutil.SkipOrFail(t, "loading the datapath: %v", err)
	}
	t.Cleanup(func() { d.Remove() })
	rs, err := ipf.Parse("live.conf", []byte("block in all\npass out quick proto tcp all keep state\n"), ipf.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	im, err := bpf.Compile(rs, bpf.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.LoadRules(im, bpf.Active); err != nil {
		t.Fatal(err)
	}
	t.Setenv(testutil.EnvBPFDir, dir)

	var cases []Test
	for _, tc := range h.tests {
		if tc.Driver == "i_test" && h.mustPass[tc.Name] && len(cases) < 4 {
			cases = append(cases, tc)
		}
	}
	if len(cases) == 0 {
		t.Fatal("no must-pass i_test case in the kit")
	}
	// what the kit would get without the driver's offline environment
	cmd := exec.Command(bin, "-Rnvf", "regress/"+cases[0].Name)
	cmd.Dir = filepath.Join(h.kit, cases[0].Family)
	cmd.Env = os.Environ()
	got, _ := cmd.Output()
	want, err := os.ReadFile(filepath.Join(h.kit, cases[0].Family, "expected", cases[0].Name))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got, want) {
		t.Fatalf("ipf -Rnvf %s beside the live filter printed the expected output: the test would not see the difference", cases[0].Name)
	}
	for _, tc := range cases {
		if res := Run(h.kit, &h.tools, tc); !res.Pass {
			t.Errorf("%s beside a live filter: %s", tc.Name, describe(res))
		}
	}
}
