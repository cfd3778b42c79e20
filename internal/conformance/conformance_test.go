package conformance

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"sluice/internal/testutil"
)

var (
	flagParallel = flag.Int("conformance.parallel", 0, "cases run at once (0 = GOMAXPROCS, at most 4)")
	flagOptional = flag.Bool("conformance.optional", false, "also run the optional tests (bpf family)")
)

// toolNames are the commands the kit uses, built from sluice/cmd/<name>.
var toolNames = []string{"ipftest", "ipf", "ipnat", "ippool", "ipmon"}

// harness is built once per test binary: the kit, the manifest and the
// tools compiled into a temporary directory.
type harness struct {
	kit      string
	tests    []Test
	tools    Tools
	binDir   string
	built    map[string]string // tool -> path
	buildErr map[string]string // tool -> build error output
	mustPass map[string]bool

	mu      sync.Mutex
	results map[string]*resultOnce
	sem     chan struct{}
}

type resultOnce struct {
	once sync.Once
	res  Result
}

var (
	harnessOnce sync.Once
	theHarness  *harness
	harnessErr  error
	binRoot     string
)

func TestMain(m *testing.M) {
	flag.Parse()
	// the commands run offline even where a filter is live (OfflineEnv);
	// the kit's own runner (TestRunScriptAgrees) inherits it
	code := testutil.RunOffline(m)
	if binRoot != "" {
		os.RemoveAll(binRoot)
	}
	os.Exit(code)
}

func getHarness(t *testing.T) *harness {
	t.Helper()
	harnessOnce.Do(func() { theHarness, harnessErr = newHarness() })
	if harnessErr != nil {
		if harnessErr == errNoKitSkip {
			testutil.SkipOrFail(t, "ipf-conformance kit: %v", kitErr)
		}
		t.Fatal(harnessErr)
	}
	return theHarness
}

var (
	errNoKitSkip = fmt.Errorf("no kit")
	kitErr       error
)

func newHarness() (*harness, error) {
	kit, err := KitDir()
	if err != nil {
		kitErr = err
		return nil, errNoKitSkip
	}
	tests, err := LoadManifest(kit)
	if err != nil {
		return nil, err
	}
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	must, err := readList("testdata/must-pass.txt")
	if err != nil {
		return nil, err
	}
	binRoot, err = os.MkdirTemp("", "sluice-conformance-bin-")
	if err != nil {
		return nil, err
	}
	h := &harness{kit: kit, tests: tests, binDir: binRoot, built: map[string]string{},
		buildErr: map[string]string{}, mustPass: must, results: map[string]*resultOnce{}}
	// Build each tool separately so that one that does not compile yet
	// only takes its own tests down.
	for _, name := range toolNames {
		pkg := filepath.Join(root, "cmd", name)
		if m, _ := filepath.Glob(filepath.Join(pkg, "*.go")); len(m) == 0 {
			continue
		}
		out := filepath.Join(binRoot, name)
		cmd := exec.Command("go", "build", "-o", out, "./cmd/"+name)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			h.buildErr[name] = strings.TrimSpace(string(b))
			continue
		}
		h.built[name] = out
	}
	cmdOf := func(n string) []string {
		if p, ok := h.built[n]; ok {
			return []string{p}
		}
		return nil
	}
	h.tools = Tools{IPFTest: cmdOf("ipftest"), IPF: cmdOf("ipf"), IPNAT: cmdOf("ipnat"),
		IPPool: cmdOf("ippool"), IPMon: cmdOf("ipmon")}
	n := *flagParallel
	if n <= 0 {
		n = min(runtime.GOMAXPROCS(0), 4)
	}
	h.sem = make(chan struct{}, n)
	return h, nil
}

// readList reads a test-name list (one name per line, # comments).
func readList(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]bool{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		l := s.Text()
		if k := strings.IndexByte(l, '#'); k >= 0 {
			l = l[:k]
		}
		for _, w := range strings.Fields(l) {
			m[w] = true
		}
	}
	return m, s.Err()
}

func (h *harness) selected() []Test {
	var sel []Test
	for _, t := range h.tests {
		if t.Default == "yes" || *flagOptional {
			sel = append(sel, t)
		}
	}
	return sel
}

// result runs test t once (bounded by the semaphore) and caches it.
func (h *harness) result(t Test) Result {
	h.mu.Lock()
	ro := h.results[t.Name]
	if ro == nil {
		ro = &resultOnce{}
		h.results[t.Name] = ro
	}
	h.mu.Unlock()
	ro.once.Do(func() {
		h.sem <- struct{}{}
		defer func() { <-h.sem }()
		ro.res = Run(h.kit, &h.tools, t)
	})
	return ro.res
}

func (h *harness) missingToolNote(r Result) string {
	var notes []string
	for name, e := range h.buildErr {
		if strings.Contains(r.Skip, name) || (name == "ipftest" && r.Skip != "") {
			notes = append(notes, fmt.Sprintf("%s does not build: %s", name, firstLine(e)))
		}
	}
	sort.Strings(notes)
	return strings.Join(notes, "; ")
}

func firstLine(s string) string {
	if k := strings.IndexByte(s, '\n'); k >= 0 {
		return s[:k] + " ..."
	}
	return s
}

// TestConformance runs every default test of the kit against the built
// tools. Tests listed in testdata/must-pass.txt must pass; the others are
// reported as known failures (skipped with the first difference), and
// passing tests missing from the list are logged for the ratchet.
func TestConformance(t *testing.T) {
	h := getHarness(t)
	for name, e := range h.buildErr {
		t.Logf("cmd/%s does not build; its tests cannot run:\n%s", name, e)
	}
	var mu sync.Mutex
	var newPasses []string
	known := map[string]bool{}
	for _, tc := range h.selected() {
		known[tc.Name] = true
	}
	for name := range h.mustPass {
		if !known[name] {
			t.Errorf("must-pass.txt names %q, which is not a default test of the kit", name)
		}
	}
	t.Run("case", func(t *testing.T) {
		for _, tc := range h.selected() {
			t.Run(tc.Name, func(t *testing.T) {
				t.Parallel()
				r := h.result(tc)
				must := h.mustPass[tc.Name]
				switch {
				case r.Pass:
					if !must {
						mu.Lock()
						newPasses = append(newPasses, tc.Name)
						mu.Unlock()
					}
				case r.Skip != "":
					msg := r.Skip
					if n := h.missingToolNote(r); n != "" {
						msg += " (" + n + ")"
					}
					if must {
						t.Fatalf("must-pass test cannot run: %s", msg)
					}
					t.Skipf("known failing: %s: %s", tc.Name, msg)
				default:
					detail := describe(r)
					if must {
						t.Fatalf("must-pass test fails: %s", detail)
					}
					t.Skipf("known failing: %s: %s", tc.Name, detail)
				}
			})
		}
	})
	sort.Strings(newPasses)
	if len(newPasses) > 0 {
		t.Logf("passing but not in testdata/must-pass.txt (add them): %s", strings.Join(newPasses, " "))
	}
}

func describe(r Result) string {
	var parts []string
	if r.Err != nil {
		parts = append(parts, r.Err.Error())
	}
	parts = append(parts, r.Diff...)
	if len(r.Stderr) > 0 {
		s := string(bytes.TrimSpace(r.Stderr))
		if len(s) > 300 {
			s = s[:300] + "..."
		}
		parts = append(parts, "stderr: "+s)
	}
	return strings.Join(parts, "; ")
}

var runLine = regexp.MustCompile(`^(PASS|FAIL|SKIP) (\S+)`)

// TestRunScriptAgrees runs the kit's own runner (python3 run) once on the
// built tools and requires it to pass exactly the tests this harness
// passes, so the Go port of the drivers cannot drift from the reference.
func TestRunScriptAgrees(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole suite twice; skipped with -short")
	}
	h := getHarness(t)
	if len(h.tools.IPFTest) == 0 {
		t.Skip("cmd/ipftest is not built yet; nothing to compare")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		testutil.SkipOrFail(t, "python3 not found: %v", err)
	}
	// The runner finds ipf, ipnat, ippool and ipmon as siblings of ipftest.
	cmd := exec.Command(py, filepath.Join(h.kit, "run"), h.tools.IPFTest[0], h.kit)
	env := os.Environ()
	for _, k := range []string{"IPFTEST", "IPF", "IPNAT", "IPPOOL", "IPMON", EnvData} {
		env = append(env, k+"=")
	}
	cmd.Env = env
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 1) {
		t.Fatalf("kit runner: %v\n%s", err, out)
	}
	theirs := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if m := runLine.FindStringSubmatch(l); m != nil {
			theirs[m[2]] = m[1]
		}
	}
	sel := h.selected()
	var wg sync.WaitGroup
	results := make([]Result, len(sel))
	for k, tc := range sel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[k] = h.result(tc)
		}()
	}
	wg.Wait()
	for _, r := range results {
		name := r.Test.Name
		got, ok := theirs[name]
		if !ok {
			if *flagOptional || r.Test.Default == "yes" {
				t.Errorf("%s: the kit runner did not report it", name)
			}
			continue
		}
		if (got == "PASS") != r.Pass {
			t.Errorf("%s: kit runner says %s, harness pass=%v (%s)", name, got, r.Pass, describe(r))
		}
	}
}
