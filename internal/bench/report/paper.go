package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"sluice/internal/bench/stats"
)

// The white papers' figures, transcribed from ../shared/seeds (text
// extracted from HP's PDFs, figures and tables flattened into running
// text and cut off at the end of each page's excerpt). Figures are facts:
// every number below appears in the source at the page given; a value
// the excerpt cuts off or does not tie to a configuration is NaN and the
// note says so. Nothing is estimated.

// Paper configurations, in the IPFilter paper's order, and the bench's
// configurations that match them.
var (
	paperConfigs = []string{"No IPFilter", "No rules", "Stateless rules", "Stateful rules"}
	sluiceOf     = map[string]string{"No rules": "sluice-attach", "Stateless rules": "sluice-stateless", "Stateful rules": "sluice-stateful"}
	nftOf        = map[string]string{"No rules": "nft-attach", "Stateless rules": "nft-stateless", "Stateful rules": "nft-stateful"}
)

// paperTable is one of the IPFilter paper's tables for one test.
type paperTable struct {
	Table  string // "Table 3"
	Page   int
	Title  string
	Test   string // the bench's test ID at the matching link profile
	Metric Metric
	// Values per paperConfigs entry, in the paper's unit (NaN: not
	// recoverable from the excerpt).
	Values [4]float64
	Unit   string
	Note   string
}

const ipfSource = "HP-UX IPFilter Version 16 Performance White Paper (HP, 2008), ../shared/seeds/hp-ipfilter-v16-performance-2008.txt"

var nan = math.NaN()

// ipfTables are tables 1–10 of the IPFilter paper.
var ipfTables = []paperTable{
	{Table: "Table 1", Page: 6, Title: "10GigE throughput, 64 KB, inbound", Test: "TCP_STREAM 64K inbound @10GigE", Metric: Rate, Unit: "Mb/s",
		Values: [4]float64{nan, nan, nan, nan},
		Note:   "the excerpt lists the figure's labels (7617.02, 7635.34, 7641.08, 7617.59, 6878.36, 6779.99, 7151.53, 7140.2, 7133.45, 6923.26, 6013.04, 4651.…) ordered by height on the page, not by bar, and cuts the table off: no value can be tied to a configuration"},
	{Table: "Table 1", Page: 6, Title: "10GigE throughput, 64 KB, outbound", Test: "TCP_MAERTS 64K outbound @10GigE", Metric: Rate, Unit: "Mb/s",
		Values: [4]float64{nan, nan, nan, nan}, Note: "as above"},
	{Table: "Table 2", Page: 7, Title: "10GigE CPU utilisation, 64 KB, inbound", Test: "TCP_STREAM 64K inbound @10GigE", Metric: SUTCPU, Unit: "%",
		Values: [4]float64{nan, nan, nan, nan},
		Note:   "figure labels only (90.47, 84.85, 73.82, 66.02, 60.1, 56.75, 46.56, 48.63, 19.07, 20.92, 15.48, 15.…), by height, table cut off"},
	{Table: "Table 2", Page: 7, Title: "10GigE CPU utilisation, 64 KB, outbound", Test: "TCP_MAERTS 64K outbound @10GigE", Metric: SUTCPU, Unit: "%",
		Values: [4]float64{nan, nan, nan, nan}, Note: "as above"},
	{Table: "Table 3", Page: 8, Title: "10GigE CRR transaction rate (1-byte messages)", Test: "TCP_CRR 1/1 inbound @10GigE", Metric: Rate, Unit: "Trans/s",
		Values: [4]float64{27333.69, 26991.77, 25556.22, 24782.21},
		Note:   "No IPFilter and No rules from the table; Stateless and Stateful from the figure's labels, in bar order (the table is cut off after No rules)"},
	{Table: "Table 4", Page: 9, Title: "10GigE CRR CPU utilisation", Test: "TCP_CRR 1/1 inbound @10GigE", Metric: SUTCPU, Unit: "%",
		Values: [4]float64{11.05, 11.18, 12.02, 12.31},
		Note:   "the table gives 11.05, 11.18 (1.17 % difference), 12.02; Stateful 12.31 from the figure"},
	{Table: "Table 5", Page: 10, Title: "1GigE throughput, 8 KB, inbound", Test: "TCP_STREAM 8K inbound @1GigE", Metric: Rate, Unit: "Mb/s",
		Values: [4]float64{942.18, 941.75, 941.77, 941.77},
		Note:   "from the figure's labels, all at one height, in bar order (inbound group first, as Table 7's text confirms for that figure)"},
	{Table: "Table 5", Page: 10, Title: "1GigE throughput, 8 KB, outbound", Test: "TCP_MAERTS 8K outbound @1GigE", Metric: Rate, Unit: "Mb/s",
		Values: [4]float64{941.27, 941.65, 940.78, nan},
		Note:   "figure labels in bar order; Stateful is cut off (\"943.…\")"},
	{Table: "Table 6", Page: 11, Title: "1GigE CPU utilisation, 8 KB", Test: "TCP_STREAM 8K inbound @1GigE", Metric: SUTCPU, Unit: "%",
		Values: [4]float64{nan, nan, nan, nan},
		Note:   "figure labels only (19.02, 15.26, 20.57, 16.01, 11.2, 7.5, 12.92, 8.…), by height, table cut off"},
	{Table: "Table 7", Page: 12, Title: "1GigE throughput, 1 KB, inbound", Test: "TCP_STREAM 1K inbound @1GigE", Metric: Rate, Unit: "Mb/s",
		Values: [4]float64{924.89, 924.74, 925.18, 924.95},
		Note:   "the table gives \"Inbound 1KB 924.89 924.…\"; the rest from the figure's labels in bar order"},
	{Table: "Table 7", Page: 12, Title: "1GigE throughput, 1 KB, outbound", Test: "TCP_MAERTS 1K outbound @1GigE", Metric: Rate, Unit: "Mb/s",
		Values: [4]float64{925.46, 924.66, 925.33, 925.53}, Note: "figure labels in bar order"},
	{Table: "Table 8", Page: 13, Title: "1GigE CPU utilisation, 1 KB", Test: "TCP_STREAM 1K inbound @1GigE", Metric: SUTCPU, Unit: "%",
		Values: [4]float64{nan, nan, nan, nan},
		Note:   "figure labels only (28.99, 24.09, 30.37, 24.68, 20.2, 15.69, 22.37, 16.…), by height, table cut off"},
	{Table: "Table 9", Page: 14, Title: "1GigE CRR transaction rate (1-byte messages)", Test: "TCP_CRR 1/1 inbound @1GigE", Metric: Rate, Unit: "Trans/s",
		Values: [4]float64{19914.01, 19712.19, 18996.44, 18568.09},
		Note:   "the table gives 19914.01, 19712.19 (1.01 % difference), 18996.44 (4.… %); Stateful 18568.09 from the figure"},
	{Table: "Table 10", Page: 15, Title: "1GigE CRR CPU utilisation", Test: "TCP_CRR 1/1 inbound @1GigE", Metric: SUTCPU, Unit: "%",
		Values: [4]float64{8.13, 8.27, 8.99, 9.35},
		Note:   "the table gives 8.13, 8.27 (1.72 %), 8.99 (10.58 %); Stateful 9.35 from the figure (the table's \"9.…\" is cut off)"},
}

const qosSource = "HP-UX IPQoS Performance and Sizing White Paper (HP, November 2005), ../shared/seeds/hp-ipqos-performance-sizing-2005.txt"

// qosRaw is one of the IPQoS paper's raw data tables: per send size
// (run.PaperSweep) the throughput, the sender's CPU utilisation and
// service demand, NaN where the excerpt is cut off.
type qosRaw struct {
	Page       int
	Title      string
	Link       string // the bench's link profile
	Config     string // what the paper says the table measured
	Throughput [7]float64
	CPU        [7]float64
	SD         [7]float64
	Note       string
}

var qosSizes = [7]int{32, 64, 128, 256, 512, 1024, 2920}

var qosTables = []qosRaw{
	{Page: 5, Title: "Raw data, 100BaseT interface", Link: "100BaseT", Config: "not stated in the excerpt",
		Throughput: [7]float64{30.29, 60.11, 94.07, 75.38, 92.45, 92.28, 94.23},
		CPU:        [7]float64{41.79, 31.72, 15.69, 8.93, 7.58, 5.19, 2.53},
		SD:         [7]float64{456.731, 162.308, 54.645, 38.993, 26.908, 18.418, nan},
		Note:       "pairs of throughput and local utilisation in send-size order (their ratio matches the service demands: SD ≈ 328 × CPU / throughput); the 2920-byte service demand is cut off (\"8.…\"), as is the table with IPQoS"},
	{Page: 6, Title: "Raw data for GIGE-bit interface: Without IPQoS (60 s tests, elapsed 60.01 s)", Link: "1GigE", Config: "without IPQoS",
		Throughput: [7]float64{30.35, 61.04, 113.99, 218.35, 405.24, 754.00, 922.74},
		CPU:        [7]float64{38.40, 36.92, 39.52, 38.69, 36.93, 34.87, nan},
		SD:         [7]float64{nan, nan, nan, nan, nan, nan, nan},
		Note:       "the excerpt ends in the utilisation column (\"19.…\" at 2920 bytes): service demands and the table with IPQoS are cut off"},
}

// paperDiff is the paper's % difference of config i against No IPFilter.
func (t paperTable) paperDiff(i int) float64 { return stats.PctDiff(t.Values[i], t.Values[0]) }

// writePapers writes the papers' figures beside the run's: for each of
// the IPFilter paper's tables, the paper's value and % difference
// against No IPFilter next to Sluice's and nftables' Δ with its
// confidence interval at the matching link profile; for the IPQoS
// paper's raw data, its absolute figures next to this run's.
func writePapers(b *strings.Builder, m *Model) {
	ipf, qos := m.suite("ipf"), m.suite("qos")
	if ipf == nil && qos == nil {
		return
	}
	b.WriteString("## The papers beside Sluice and nftables\n\n")
	b.WriteString("HP's figures are transcribed from the papers' text in `../shared/seeds/` (source and page per table); " +
		"a figure the excerpt cuts off or does not tie to a configuration is shown as —, never estimated. " +
		"HP's Δ is the paper's % difference against *No IPFilter*; ours is the change of the median against `none` in this run, " +
		"with its 95 % bootstrap confidence interval, on the link profile that matches the paper's adapter " +
		"(*within noise*: the interval includes 0). HP's hosts were separate machines on real adapters; ours are namespaces of one machine, " +
		"so their CPU is the whole machine's.\n\n")
	if ipf != nil {
		fmt.Fprintf(b, "### IPFilter (%s)\n\n", ipfSource)
		b.WriteString("| HP table (page) | Test here | Metric | Configuration | HP value | HP Δ | Sluice Δ [95 % CI] | nftables Δ [95 % CI] |\n|---|---|---|---|--:|--:|--:|--:|\n")
		for _, t := range ipfTables {
			for i, pc := range paperConfigs {
				row := fmt.Sprintf("| %s (p. %d): %s | %s | %s | %s | %s | %s |", t.Table, t.Page, t.Title, t.Test, metricName(t.Metric), pc,
					paperNum(t.Values[i]), pctOrDash(t.paperDiff(i), i == 0))
				if i == 0 {
					row += " " + baseCell(ipf, t.Test, t.Metric) + " | |"
				} else {
					row += " " + diffCell(ipf, t.Test, sluiceOf[pc], t.Metric) + " | " + diffCell(ipf, t.Test, nftOf[pc], t.Metric) + " |"
				}
				b.WriteString(row + "\n")
			}
		}
		b.WriteString("\nNotes on the transcription:\n\n")
		seen := map[string]bool{}
		for _, t := range ipfTables {
			k := t.Table + t.Title
			if seen[k] || t.Note == "as above" {
				continue
			}
			seen[k] = true
			fmt.Fprintf(b, "- %s (p. %d), %s: %s.\n", t.Table, t.Page, t.Title, t.Note)
		}
		b.WriteString("\nService demand, which the IPFilter paper does not tabulate, follows from its CPU and rate tables where both are complete " +
			"(CRR, tables 3–4 and 9–10): HP's Δ of CPU per transaction beside ours.\n\n")
		b.WriteString("| HP tables | Test here | Configuration | HP Δ service demand (derived) | Sluice Δ [95 % CI] | nftables Δ [95 % CI] |\n|---|---|---|--:|--:|--:|\n")
		for _, pair := range [][2]int{{4, 5}, {12, 13}} {
			rate, cpu := ipfTables[pair[0]], ipfTables[pair[1]]
			for i := 1; i < 4; i++ {
				pc := paperConfigs[i]
				sd := stats.PctDiff(cpu.Values[i]/rate.Values[i], cpu.Values[0]/rate.Values[0])
				fmt.Fprintf(b, "| %s + %s | %s | %s | %s | %s | %s |\n", rate.Table, cpu.Table, rate.Test, pc, pct(sd),
					diffCell(ipf, rate.Test, sluiceOf[pc], SUTSD), diffCell(ipf, rate.Test, nftOf[pc], SUTSD))
			}
		}
		b.WriteString("\n")
	}
	if qos != nil {
		fmt.Fprintf(b, "### IPQoS (%s)\n\n", qosSource)
		b.WriteString("The excerpt keeps the raw data of one configuration per adapter and cuts off the tables with IPQoS, so HP's Δ for marking " +
			"cannot be shown; HP's absolute figures stand beside this run's `none` and the marking configurations' Δ at the same link profile " +
			"(a shaped veth, not HP's adapters: compare shapes, not values).\n\n")
		for _, q := range qosTables {
			fmt.Fprintf(b, "#### p. %d: %s (%s) — here at %s\n\n", q.Page, q.Title, q.Config, q.Link)
			b.WriteString("| Send size | HP throughput (10^6bits/s) | HP CPU (%) | HP SD (us/KB) | none here: throughput | none here: SUT SD | sluice-qos Δ SD [95 % CI] | nft-dscp Δ SD [95 % CI] |\n|--:|--:|--:|--:|--:|--:|--:|--:|\n")
			for i, size := range qosSizes {
				id := fmt.Sprintf("TCP_STREAM m=%d outbound @%s", size, q.Link)
				fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s | %s | %s |\n", size, paperNum(q.Throughput[i]), paperNum(q.CPU[i]), paperNum(q.SD[i]),
					baseCell(qos, id, Rate), baseCell(qos, id, SUTSD), diffCell(qos, id, "sluice-qos", SUTSD), diffCell(qos, id, "nft-dscp", SUTSD))
			}
			fmt.Fprintf(b, "\nNote: %s.\n\n", q.Note)
		}
	}
}

// paperNum prints a paper's figure as the paper prints it.
func paperNum(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func metricName(k Metric) string {
	switch k {
	case Rate:
		return "rate"
	case SUTCPU:
		return "CPU"
	case SUTSD:
		return "service demand"
	}
	return k.Title()
}

func pctOrDash(v float64, base bool) string {
	if base {
		return "(base)"
	}
	return pct(v)
}

func (m *Model) suite(name string) *Suite {
	for i := range m.Suites {
		if m.Suites[i].Name == name {
			return &m.Suites[i]
		}
	}
	return nil
}

// baseCell is none's median of a metric, "not run" when absent.
func baseCell(s *Suite, test string, k Metric) string {
	c, ok := s.Cells[test]["none"]
	if !ok || c[k].N == 0 {
		return "not run"
	}
	return "none: " + num(c[k].Median)
}

// diffCell is a configuration's Δ with its interval, "not run" when
// absent.
func diffCell(s *Suite, test, config string, k Metric) string {
	c, ok := s.Cells[test][config]
	if !ok || c[k].N == 0 {
		return "not run"
	}
	return deltaCI(c[k])
}

// deltaCI formats Δ with its confidence interval and the noise verdict.
func deltaCI(c Cell) string {
	s := pct(c.Diff)
	if c.DiffCI.Valid() {
		s += fmt.Sprintf(" [%s, %s]", pctShort(c.DiffCI.Lo), pctShort(c.DiffCI.Hi))
		if c.Noise() {
			s += " within noise"
		}
	} else if !math.IsNaN(c.Diff) {
		s += " (no CI: one repetition)"
	}
	return s
}

func pctShort(v float64) string {
	if math.Abs(v) < 0.05 {
		v = 0
	}
	return fmt.Sprintf("%+.1f", v)
}
