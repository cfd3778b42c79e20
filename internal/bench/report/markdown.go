package report

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"sluice/internal/bench/result"
	"sluice/internal/bench/stats"
)

// Options adjust the outputs.
type Options struct {
	// CI adds the 95 % confidence interval of the mean to the cells.
	CI bool
	// Charts lists chart files (relative to the Markdown file) to link.
	Charts []string
}

// num formats a value with about four significant digits.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v):
		return "—"
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	if math.Abs(v) < 0.05 {
		v = 0 // no "-0.0 %"
	}
	return fmt.Sprintf("%+.1f %%", v)
}

func (c Cell) text(ci bool) string {
	if c.N == 0 || math.IsNaN(c.Median) {
		return "—"
	}
	s := num(c.Median)
	if ci && !math.IsNaN(c.CI95) {
		s += " ±" + num(c.CI95)
	}
	if c.N > 1 {
		s += " [" + num(c.Min) + "–" + num(c.Max) + "]"
	}
	return s
}

// WriteMarkdown writes the report in Markdown.
func WriteMarkdown(w io.Writer, m *Model, o Options) error {
	var b strings.Builder
	r := m.Run
	b.WriteString("# Sluice bench report\n\n")
	fmt.Fprintf(&b, "| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| Started | %s |\n", r.Start.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "| Kernel | %s |\n", r.Kernel)
	fmt.Fprintf(&b, "| CPU | %s × %d |\n", r.CPUModel, r.NumCPU)
	gen := r.Generator
	if gen == "" {
		gen = r.Runner
	}
	fmt.Fprintf(&b, "| Traffic generator (which netperf measured) | %s |\n", oneLine(gen))
	fmt.Fprintf(&b, "| Mode | %s: %d repetitions of %v per test, %v warm-up after each apply, configurations interleaved |\n",
		r.Mode, r.Reps, r.Duration, r.Warmup)
	fmt.Fprintf(&b, "| Test bed | %s |\n", oneLine(r.Topology))
	if links := linkProfiles(r.Tests); links != "" {
		fmt.Fprintf(&b, "| Link profiles | %s |\n", links)
	}
	fmt.Fprintf(&b, "| Load before the run | %s |\n", loadText(r.LoadBefore, false))
	fmt.Fprintf(&b, "| Load during the run | %s |\n", loadText(m.LoadDuring, true))
	fmt.Fprintf(&b, "| Repetitions measured | %d (%d failed) |\n\n", m.Reps, len(m.Failures))
	if m.Interrupted {
		b.WriteString("> **The run was interrupted**: the tables show what was measured before it stopped.\n\n")
	}
	for _, w := range m.Warnings() {
		fmt.Fprintf(&b, "> **Warning**: %s\n\n", w)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n")
	}
	b.WriteString("Cells are medians with [min–max] over the repetitions")
	if o.CI {
		b.WriteString(", ± the 95 % confidence interval of the mean")
	}
	b.WriteString("; Δ is the change of the median against `none` measured in the same run, with its 95 % confidence interval " +
		"from the repetitions (percentile bootstrap of both samples' medians, " + fmt.Sprint(stats.BootstrapResamples) + " resamples) in brackets; " +
		"*within noise* (≈ in the summaries) marks a Δ whose interval includes 0.\n\n")

	writeSummary(&b, m)
	writePapers(&b, m)
	writeBPF(&b, m)

	b.WriteString("## Configurations\n\n| Name | Family | Description |\n|---|---|---|\n")
	for _, c := range r.Configs {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", oneLine(c.Name), c.Family, oneLine(c.Description))
	}
	b.WriteString("\n")

	b.WriteString("## Tests\n\nDirections are relative to the SUT; the SUT's CPU and service demand are netperf's local figures where the client ran on the SUT and its remote ones where it ran on the peer.\n\n")
	b.WriteString("| Test | netperf test run | Client on | netserver on | Direction | Link |\n|---|---|---|---|---|---|\n")
	for _, t := range r.Tests {
		link := t.Link
		if link == "" {
			link = "veth"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", oneLine(t.ID), t.NetperfTest(), hostName(t.ClientHost()), hostName(t.ServerHost()), t.Direction(), link)
	}
	b.WriteString("\n")

	for _, s := range m.Suites {
		fmt.Fprintf(&b, "## %s\n\n", s.Title)
		if len(s.Configs) == 0 {
			b.WriteString("No measurements.\n\n")
			continue
		}
		for k := Metric(0); k < numMetrics; k++ {
			fmt.Fprintf(&b, "### %s\n\n", k.Title())
			b.WriteString("| Test | Unit |")
			align := "|---|---|"
			for _, c := range s.Configs {
				fmt.Fprintf(&b, " %s |", oneLine(c))
				align += "--:|"
				if c != "none" {
					b.WriteString(" Δ |")
					align += "--:|"
				}
			}
			b.WriteString("\n" + align + "\n")
			for _, t := range s.Tests {
				fmt.Fprintf(&b, "| %s | %s |", oneLine(t.ID), k.Unit(t))
				for _, c := range s.Configs {
					cell, ok := s.Cells[t.ID][c]
					if !ok {
						b.WriteString(" — |")
						if c != "none" {
							b.WriteString(" — |")
						}
						continue
					}
					fmt.Fprintf(&b, " %s |", cell[k].text(o.CI))
					if c != "none" {
						fmt.Fprintf(&b, " %s |", deltaCI(cell[k]))
					}
				}
				b.WriteString("\n")
			}
			b.WriteString("\n")
		}
	}
	if len(o.Charts) > 0 {
		b.WriteString("## Charts\n\n")
		for _, c := range o.Charts {
			fmt.Fprintf(&b, "![%s](%s)\n\n", c, c)
		}
	}
	if len(m.Skips) > 0 {
		b.WriteString("## Skipped configurations\n\n| Configuration | Reason |\n|---|---|\n")
		for _, s := range m.Skips {
			fmt.Fprintf(&b, "| %s | %s |\n", s.Config, oneLine(s.Reason))
		}
		b.WriteString("\n")
	}
	if len(m.Failures) > 0 {
		b.WriteString("## Failed repetitions\n\n| Configuration | Test | Repetition | Error |\n|---|---|--:|---|\n")
		for _, f := range m.Failures {
			fmt.Fprintf(&b, "| %s | %s | %d | %s |\n", f.Config, f.Test, f.Rep, oneLine(f.Error))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeSummary writes the headline tables: per suite, a row per
// configuration and a column per test; the none row holds the median
// rates, the others the change of the rate and, in parentheses, of the
// SUT's service demand against none.
func writeSummary(b *strings.Builder, m *Model) {
	have := false
	for _, s := range m.Suites {
		have = have || len(s.Configs) > 0
	}
	if !have {
		return
	}
	b.WriteString("## Summary\n\nRow `none`: median rate (10^6bits/s for streams, Trans/s for RR). Other rows: change of the median rate against `none` " +
		"with its 95 % confidence interval, in parentheses the change of the SUT's service demand (lower is cheaper), in %; " +
		"≈ marks a change within noise (its interval includes 0).\n\n")
	for _, s := range m.Suites {
		if len(s.Configs) == 0 {
			continue
		}
		fmt.Fprintf(b, "### %s\n\n| Configuration |", s.Title)
		align := "|---|"
		for _, t := range s.Tests {
			fmt.Fprintf(b, " %s |", oneLine(t.ID))
			align += "--:|"
		}
		b.WriteString("\n" + align + "\n")
		for _, c := range s.Configs {
			fmt.Fprintf(b, "| %s |", oneLine(c))
			for _, t := range s.Tests {
				cell, ok := s.Cells[t.ID][c]
				switch {
				case !ok || cell[Rate].N == 0:
					b.WriteString(" — |")
				case c == "none":
					fmt.Fprintf(b, " %s |", num(cell[Rate].Median))
				default:
					fmt.Fprintf(b, " %s (%s) |", compactCI(cell[Rate]), compactCI(cell[SUTSD]))
				}
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
}

// compactCI is a Δ for the summary tables: "-13.5 [-18.0, -9.1]", with
// "≈" in front when the interval includes 0.
func compactCI(c Cell) string {
	if math.IsNaN(c.Diff) {
		return "—"
	}
	s := pctShort(c.Diff)
	if c.DiffCI.Valid() {
		s += " [" + pctShort(c.DiffCI.Lo) + ", " + pctShort(c.DiffCI.Hi) + "]"
		if c.Noise() {
			s = "≈" + s
		}
	}
	return s
}

// linkProfiles lists the link profiles of the tests.
func linkProfiles(ts []result.Test) string {
	var out []string
	seen := map[string]bool{}
	for _, t := range ts {
		l := t.Link
		if l == "" {
			l = "veth (not shaped)"
		}
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	if len(out) == 1 && out[0] == "veth (not shaped)" {
		return ""
	}
	return strings.Join(out, ", ") + " (token-bucket shaping of both veth ends at the line rate; test IDs say @PROFILE)"
}

// loadText describes the machine's load.
func loadText(l *result.Load, during bool) string {
	if l == nil {
		return "not recorded"
	}
	s := fmt.Sprintf("load average %.2f / %.2f / %.2f", l.Load1, l.Load5, l.Load15)
	if during && l.MaxLoad1 > 0 {
		s += fmt.Sprintf(" (1-min peak %.2f)", l.MaxLoad1)
	}
	if l.Interval > 0 {
		s += fmt.Sprintf("; over %s: CPU busy %.1f %%, steal %.1f %%", time.Duration(l.Interval*float64(time.Second)).Round(time.Second), l.BusyPct, l.StealPct)
	}
	return s
}

// writeBPF writes the in-kernel cost table: per test and configuration
// the ns per packet of the programs on the SUT's link, with the trivial
// program's as the floor.
func writeBPF(b *strings.Builder, m *Model) {
	have := false
	for _, s := range m.Suites {
		have = have || len(s.BPF) > 0
	}
	if !have {
		return
	}
	b.WriteString("## In-kernel cost per packet\n\n")
	b.WriteString("The kernel's own BPF run-time statistics (on for the run, through a statistics fd: `run_time_ns / run_cnt` of the programs attached with TCX " +
		"to the SUT's link, accumulated over each test), median [min–max] over the repetitions, in ns per packet; " +
		"the programs of one hook on one interface (a filter's and a NAT's) add up for a packet, and on the gateway of the NAT suite both its interfaces count; " +
		"`tcx-floor` (`tcx-floor-gw` on the gateway) is a program that only returns TCX_NEXT, the floor of any attached program (the statistics' own cost included). " +
		"The × floor columns divide each repetition's figure by the floor program's of the same repetition (median [min–max] of those ratios): " +
		"the host's speed can change between repetitions, and within one the two were measured minutes apart at most. " +
		"Beside them the rate's and service demand's Δ of the same test, so the in-kernel cost and its effect read together.\n\n")
	for _, s := range m.Suites {
		if len(s.BPF) == 0 {
			continue
		}
		fmt.Fprintf(b, "### %s\n\n| Test | Configuration | ingress ns/packet | egress ns/packet | ingress × floor | egress × floor | packets/test (in, out) | Δ rate | Δ SUT service demand |\n|---|---|--:|--:|--:|--:|--:|--:|--:|\n", s.Title)
		for _, t := range s.Tests {
			for _, c := range s.Configs {
				costs, ok := s.BPF[t.ID][c]
				if !ok {
					continue
				}
				var in, out BPFCost
				for _, x := range costs {
					if x.Hook == "ingress" {
						in = x
					} else {
						out = x
					}
				}
				cell := s.Cells[t.ID][c]
				fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s, %s | %s | %s |\n", oneLine(t.ID), c, costText(in), costText(out),
					ratioText(in.OverFloor), ratioText(out.OverFloor), runsText(in), runsText(out), deltaCI(cell[Rate]), deltaCI(cell[SUTSD]))
			}
		}
		b.WriteString("\n")
		writeProgs(b, s)
	}
}

// writeProgs lists, for the configurations with more than one program on
// a hook of one interface, each program's runs and ns per run: the
// hook's total above does not say which of them the packets reached.
func writeProgs(b *strings.Builder, s Suite) {
	head := false
	for _, t := range s.Tests {
		for _, c := range s.Configs {
			ps := s.Progs[t.ID][c]
			n := map[[2]string]int{}
			many := false
			for _, p := range ps {
				k := [2]string{p.Hook, p.Link}
				n[k]++
				many = many || n[k] > 1
			}
			if !many {
				continue
			}
			if !head {
				b.WriteString("Programs of the hooks that have more than one, in the hook's order (0 runs: attached, no packet reached it):\n\n" +
					"| Test | Configuration | hook | interface | program | runs/test | ns/run |\n|---|---|---|---|---|--:|--:|\n")
				head = true
			}
			for _, p := range ps {
				ns := "—"
				if p.NsPerRun.N > 0 {
					ns = costText(BPFCost{NsPerPkt: p.NsPerRun})
				}
				fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %.0f | %s |\n", oneLine(t.ID), c, p.Hook, p.Link, p.Name, p.Runs, ns)
			}
		}
	}
	if head {
		b.WriteString("\n")
	}
}

func runsText(c BPFCost) string {
	if c.NsPerPkt.N == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f", c.Runs)
}

// ratioText prints a ratio to the floor as 1.62× [1.41–1.90].
func ratioText(r stats.Summary) string {
	if r.N == 0 {
		return "—"
	}
	s := fmt.Sprintf("%.2f×", r.Median)
	if r.N > 1 {
		s += fmt.Sprintf(" [%.2f–%.2f]", r.Min, r.Max)
	}
	return s
}

func costText(c BPFCost) string {
	if c.NsPerPkt.N == 0 {
		return "—"
	}
	s := num(c.NsPerPkt.Median)
	if c.NsPerPkt.N > 1 {
		s += " [" + num(c.NsPerPkt.Min) + "–" + num(c.NsPerPkt.Max) + "]"
	}
	return s
}

func hostName(h string) string {
	if h == result.SUT {
		return "SUT"
	}
	return h
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", "\\|")
}
