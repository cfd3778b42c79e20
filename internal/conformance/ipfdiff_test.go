package conformance

import (
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sluice/internal/testutil"
)

var (
	flagDiffCases = flag.Int("ipfdiff.cases", 600, "cases TestIPFDiff runs (all four families together)")
	flagDiffSeed  = flag.Int("ipfdiff.seed", 1409, "seed of TestIPFDiff")
	// A long run's summary (ipfdiff.py --out DIR) classified against the
	// documented differences without running anything: how the long runs
	// in docs/ipfilter-differences.md were counted.
	flagDiffSummary = flag.String("ipfdiff.summary", "", "classify this summary.json instead of running ipfdiff.py")
)

// EnvIPFDiff names the environment variable that overrides the location
// of the differential tester (the folder holding ipfdiff.py and bin/).
const EnvIPFDiff = "IPFDIFF_DIR"

// knownDiff is one entry of testdata/ipfdiff-known.json: a bucket of
// disagreements docs/ipfilter-differences.md explains (IPFilter's Linux
// build misbehaving, or a plain IPFilter bug that Sluice does not copy).
// A bucket matches when its check and kind are the entry's, it carries
// every tag of Tags and its reproducer (files, command, both outputs)
// matches Repro, a regular expression, if set, and not Unless, if set.
type knownDiff struct {
	ID     string   `json:"id"`
	Check  string   `json:"check"`
	Kind   string   `json:"kind"`
	Tags   []string `json:"tags"`
	Repro  string   `json:"repro"`
	Unless string   `json:"unless"`
	Why    string   `json:"why"`
	re     *regexp.Regexp
	unless *regexp.Regexp
}

type diffBucket struct {
	Bucket     int      `json:"bucket"`
	Family     string   `json:"family"`
	Check      string   `json:"check"`
	Kind       string   `json:"kind"`
	Sub        string   `json:"sub"`
	Tags       []string `json:"tags"`
	PacketTags []string `json:"packet_tags"`
	Count      int      `json:"count"`
	Repro      string   `json:"repro"`
}

type diffSummary struct {
	Stats   map[string]map[string]int `json:"stats"`
	Buckets []diffBucket              `json:"buckets"`
}

func (k *knownDiff) matches(b *diffBucket) bool {
	if k.Check != b.Check || (k.Kind != b.Kind && k.Kind != b.Kind+"/"+b.Sub) {
		return false
	}
	for _, t := range k.Tags {
		if p, ok := strings.CutSuffix(t, "*"); ok {
			// a prefix: keep-state* is keep-state and its
			// keep-state(limit), keep-state(newisn), ... forms
			has := func(s string) bool { return strings.HasPrefix(s, p) }
			if !slices.ContainsFunc(b.Tags, has) && !slices.ContainsFunc(b.PacketTags, has) {
				return false
			}
			continue
		}
		if !slices.Contains(b.Tags, t) && !slices.Contains(b.PacketTags, t) {
			return false
		}
	}
	return (k.re == nil || k.re.MatchString(b.Repro)) && (k.unless == nil || !k.unless.MatchString(b.Repro))
}

// ipfdiffDir finds ../shared/ipf-diff (or $IPFDIFF_DIR).
func ipfdiffDir() (string, error) {
	if d := os.Getenv(EnvIPFDiff); d != "" {
		return filepath.Abs(d)
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Clean(filepath.Join(root, "..", "shared", "ipf-diff")), nil
}

// TestIPFDiff runs IPFilter's differential tester (ipfdiff.py: random
// ipf.conf, ipnat.conf and ippool.conf files and packet streams, run
// through IPFilter's own C tools and Sluice's, compared byte for byte) on
// a fixed seed, and fails on any disagreement that
// testdata/ipfdiff-known.json does not list as documented. It takes well
// under a minute on this project's machine (-ipfdiff.cases to change).
// Under CI=true a missing python3 or C tool set fails it.
func TestIPFDiff(t *testing.T) {
	dir, err := ipfdiffDir()
	if err != nil {
		t.Fatal(err)
	}
	script, cbin := filepath.Join(dir, "ipfdiff.py"), filepath.Join(dir, "bin")
	if _, err := os.Stat(script); err != nil {
		testutil.SkipOrFail(t, "ipf-diff tester: %v", err)
	}
	for _, tool := range []string{"ipftest", "ipf", "ipnat", "ippool"} {
		if _, err := os.Stat(filepath.Join(cbin, tool)); err != nil {
			testutil.SkipOrFail(t, "IPFilter's C tools: %v", err)
		}
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		testutil.SkipOrFail(t, "python3: %v", err)
	}
	b, err := os.ReadFile(filepath.Join("testdata", "ipfdiff-known.json"))
	if err != nil {
		t.Fatal(err)
	}
	var known []knownDiff
	if err := json.Unmarshal(b, &known); err != nil {
		t.Fatalf("testdata/ipfdiff-known.json: %v", err)
	}
	for i := range known {
		if known[i].ID == "" || known[i].Why == "" {
			t.Fatalf("testdata/ipfdiff-known.json entry %d: id and why are required", i)
		}
		if known[i].Repro != "" {
			if known[i].re, err = regexp.Compile(known[i].Repro); err != nil {
				t.Fatalf("testdata/ipfdiff-known.json %s: %v", known[i].ID, err)
			}
		}
		if known[i].Unless != "" {
			if known[i].unless, err = regexp.Compile(known[i].Unless); err != nil {
				t.Fatalf("testdata/ipfdiff-known.json %s: %v", known[i].ID, err)
			}
		}
	}
	var res []byte
	out := t.TempDir()
	if *flagDiffSummary != "" {
		out = filepath.Dir(*flagDiffSummary)
	} else {
		h := getHarness(t)
		for _, tool := range []string{"ipftest", "ipf", "ipnat", "ippool"} {
			if _, ok := h.built[tool]; !ok {
				t.Fatalf("%s did not build: %s", tool, h.buildErr[tool])
			}
		}
		cmd := exec.Command(py, script, "--c-bin", cbin, "--go-bin", h.binDir,
			"--seed", strconv.Itoa(*flagDiffSeed), "--cases", strconv.Itoa(*flagDiffCases),
			"--jobs", "2", "--minimise-per-key", "1", "--budget", "150", "--quiet", "--out", out)
		// Sluice's tools must see no loaded filter or pools: ipf -n on a
		// host with one (a privileged test's, a running gateway's) plans
		// the file against it and prints what would change.
		if cmd.Env, err = testutil.OfflineEnv(os.Environ(), t.TempDir()); err != nil {
			t.Fatal(err)
		}
		res, err = cmd.CombinedOutput()
	}
	last := strings.TrimSpace(string(res))
	if i := strings.LastIndexByte(last, '\n'); i >= 0 {
		last = last[i+1:]
	}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("ipfdiff.py: %v\n%s", err, res)
	}
	sb, rerr := os.ReadFile(filepath.Join(out, "summary.json"))
	if rerr != nil {
		t.Fatalf("ipfdiff.py wrote no summary (%v): %v\n%s", err, rerr, res)
	}
	var sum diffSummary
	if err := json.Unmarshal(sb, &sum); err != nil {
		t.Fatal(err)
	}
	cases := 0
	for fam, st := range sum.Stats {
		cases += st["cases"]
		t.Logf("%s: %d cases, %d with disagreements, %d C crashes excluded", fam, st["cases"], st["disagreeing cases"], st["c-crash"])
	}
	if cases == 0 {
		t.Fatalf("ipfdiff.py ran no case:\n%s", res)
	}
	t.Logf("ipfdiff.py: %s", last)
	for i := range sum.Buckets {
		bk := &sum.Buckets[i]
		id := ""
		for j := range known {
			if known[j].matches(bk) {
				id = known[j].ID
				break
			}
		}
		if id != "" {
			t.Logf("documented (%s): %s %s [%s], %d disagreements", id, bk.Check, bk.Kind, strings.Join(bk.Tags, ","), bk.Count)
			continue
		}
		t.Errorf("undocumented disagreement with IPFilter: bucket %d (%s) %s %s/%s [%s] %v, %d cases\n%s",
			bk.Bucket, bk.Family, bk.Check, bk.Kind, bk.Sub, strings.Join(bk.Tags, ","), bk.PacketTags, bk.Count, bk.Repro)
	}
}

// TestKnownDiffTags: a known pattern's tag names a bucket tag exactly, or
// with a trailing * any tag it starts; every tag must be there.
func TestKnownDiffTags(t *testing.T) {
	b := &diffBucket{Check: "ipftest", Kind: "output", Sub: "packets", Tags: []string{"keep-state(limit)", "proto-tcp"}, PacketTags: []string{"pkt:tcp"}}
	for _, c := range []struct {
		tags []string
		want bool
	}{
		{[]string{"keep-state"}, false},
		{[]string{"keep-state*"}, true},
		{[]string{"keep-state*", "pkt:tcp"}, true},
		{[]string{"keep-state*", "pkt:udp"}, false},
		{[]string{"keep-frags*"}, false},
		{[]string{"proto-tcp"}, true},
	} {
		k := &knownDiff{Check: "ipftest", Kind: "output/packets", Tags: c.tags}
		if got := k.matches(b); got != c.want {
			t.Errorf("tags %v: matches = %v, want %v", c.tags, got, c.want)
		}
	}
}
