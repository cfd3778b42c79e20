package report

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// WriteSummary writes a one-screen overview: per test the median rate
// under "none", and for every other configuration the change of the rate
// and (in parentheses) of the SUT's service demand, in %.
func WriteSummary(w io.Writer, m *Model) error {
	var b strings.Builder
	r := m.Run
	fmt.Fprintf(&b, "sluice bench: %s, %s × %d, %s; %d × %v per test", r.Kernel, r.CPUModel, r.NumCPU, r.Runner, r.Reps, r.Duration)
	if m.Interrupted {
		b.WriteString(" (INTERRUPTED)")
	}
	b.WriteString("\n")
	if r.Generator != "" {
		fmt.Fprintf(&b, "measured by: %s\n", r.Generator)
	}
	for _, w := range m.Warnings() {
		fmt.Fprintf(&b, "WARNING: %s\n", w)
	}
	for _, s := range m.Suites {
		if len(s.Configs) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s\n", s.Title)
		const w0, w = 38, 16
		fmt.Fprintf(&b, "%-*s", w0, "")
		for _, c := range s.Configs {
			fmt.Fprintf(&b, " %*s", w, trunc(c, w))
		}
		b.WriteString("\n")
		for _, t := range s.Tests {
			fmt.Fprintf(&b, "%-*s", w0, trunc(t.ID, w0))
			for _, c := range s.Configs {
				cell, ok := s.Cells[t.ID][c]
				var txt string
				switch {
				case !ok:
					txt = "—"
				case c == "none":
					unit := " Mb/s"
					if !t.Stream() {
						unit = " Tr/s"
					}
					txt = num(cell[Rate].Median) + unit
				default:
					txt = noisePct(cell[Rate]) + " (" + noisePct(cell[SUTSD]) + ")"
				}
				fmt.Fprintf(&b, " %*s", w, txt)
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("\nvs none: Δrate% (ΔSUT service demand%), medians; ≈ within noise (the 95 % CI of the repetitions includes 0); inbound/outbound relative to the SUT.")
	if r.Reps < 2 {
		b.WriteString(" One repetition: no confidence interval, so no Δ can be told from noise.")
	}
	if len(m.Skips) > 0 {
		var names []string
		for _, s := range m.Skips {
			names = append(names, s.Config)
		}
		fmt.Fprintf(&b, " Skipped: %s.", strings.Join(names, ", "))
	}
	if len(m.Failures) > 0 {
		fmt.Fprintf(&b, " %d failed repetitions.", len(m.Failures))
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// noisePct is a Δ with "≈" in front when it is within noise.
func noisePct(c Cell) string {
	s := shortPct(c.Diff)
	if c.Noise() {
		s = "≈" + s
	}
	return s
}

func shortPct(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	if math.Abs(v) < 0.05 {
		v = 0
	}
	return fmt.Sprintf("%+.1f", v)
}

func trunc(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
