package bpf

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

// stackDepthLine is the verifier's last word on each function's frame
// (LogLevelStats): "stack depth A+B+…", in the order of the functions.
var stackDepthLine = regexp.MustCompile(`stack depth ([0-9+]+)`)

// TestPrivilegedStackChainVerifier holds TestStackChain's reading of the
// object against the kernel's: the filter's programs, generic and made
// for a configuration (the established path in), loaded with the
// verifier's statistics; each function's frame as the verifier reports
// it is at most the one read from the object (plus the 24 bytes a
// bpf_loop the kernel inlined adds after its check), so the chains
// TestStackChain adds are at least the kernel's. The chains over the
// verifier's own frames are logged.
func TestPrivilegedStackChainVerifier(t *testing.T) {
	h := newHarness(t)
	static, _ := objectStacks(t)
	for _, s := range []struct {
		name string
		spec progSpec
	}{{"generic", genericSpec}, {"configuration", progSpec{feat: featAll, mode: kmConfig, state: true, cfg: true}}} {
		spec, err := filterSpec()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.spec.setVars(spec); err != nil {
			t.Fatal(err)
		}
		foldRodata(spec)
		var progs struct {
			In  *ebpf.Program `ebpf:"sluice_ingress"`
			Out *ebpf.Program `ebpf:"sluice_egress"`
			Ctl *ebpf.Program `ebpf:"sluice_control"`
		}
		if err := spec.LoadAndAssign(&progs, &ebpf.CollectionOptions{MapReplacements: h.d.replacements(spec),
			Programs: ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats}}); err != nil {
			t.Fatal(wrapVerifier("loading the filter", err))
		}
		for name, p := range map[string]*ebpf.Program{"sluice_ingress": progs.In, "sluice_egress": progs.Out, "sluice_control": progs.Ctl} {
			names, depths := verifierFrames(t, p)
			kernel := map[string]*stackFunc{}
			for i, n := range names {
				f := static[n]
				if f == nil {
					t.Errorf("%s %s: function %s is not in the object", s.name, name, n)
					continue
				}
				if depths[i] > f.depth+24*f.loops {
					t.Errorf("%s %s: the verifier's frame of %s is %d bytes, read from the object %d", s.name, name, n, depths[i], f.depth)
				}
				kernel[n] = &stackFunc{depth: depths[i] - 24*f.loops, calls: f.calls, async: f.async}
				if kernel[n].depth < 0 {
					kernel[n].depth = depths[i]
				}
			}
			for _, r := range []struct {
				name  string
				round func(int) int
			}{{"32", roundFrame32}, {"16", roundFrame16}} {
				d, ch := deepestChain(kernel, name, r.round)
				t.Logf("%s %s, the verifier's frames rounded to %s: %d bytes, margin %d: %s", s.name, name, r.name, d, maxBPFStack-d, strings.Join(ch, " > "))
			}
		}
		progs.In.Close()
		progs.Out.Close()
		progs.Ctl.Close()
	}
}

// verifierFrames is the functions of p in the kernel's order (by their
// offsets) and the frame the verifier reported for each.
func verifierFrames(t *testing.T, p *ebpf.Program) ([]string, []int) {
	t.Helper()
	m := stackDepthLine.FindStringSubmatch(p.VerifierLog)
	if m == nil {
		t.Fatalf("no stack depth in the verifier's log:\n%s", p.VerifierLog)
	}
	var depths []int
	for _, x := range strings.Split(m[1], "+") {
		n, err := strconv.Atoi(x)
		if err != nil {
			t.Fatal(err)
		}
		depths = append(depths, n)
	}
	info, err := p.Info()
	if err != nil {
		t.Fatal(err)
	}
	fos, err := info.FuncInfos()
	if err != nil {
		t.Fatal(err)
	}
	sort.SliceStable(fos, func(i, j int) bool { return fos[i].Offset < fos[j].Offset })
	var names []string
	for _, fo := range fos {
		names = append(names, fo.Func.Name)
	}
	if len(names) != len(depths) {
		t.Fatalf("%d functions, %d frames in the verifier's log (%s)", len(names), len(depths), m[0])
	}
	return names, depths
}
