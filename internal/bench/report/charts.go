package report

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"sluice/internal/bench/result"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// chart is one figure before rendering.
type chart struct {
	name  string // file stem
	title string // drawn centred over the whole figure
	plot  *plot.Plot
	w, h  vg.Length
	// legend, if legendW > 0, is drawn in a strip that wide right of
	// the plot, where it covers no data however many configurations
	// there are, and no label is clipped.
	legend  plot.Legend
	legendW vg.Length
}

// Family palettes: Sluice's configurations in blues and greens,
// nftables' in reds and oranges, so the two families read apart at a
// glance and the members of each stay distinct.
var (
	sluiceColors = []color.Color{
		color.RGBA{0x08, 0x45, 0x94, 0xff}, color.RGBA{0x21, 0x71, 0xb5, 0xff}, color.RGBA{0x42, 0x92, 0xc6, 0xff},
		color.RGBA{0x6b, 0xae, 0xd6, 0xff}, color.RGBA{0x23, 0x8b, 0x45, 0xff}, color.RGBA{0x74, 0xc4, 0x76, 0xff},
	}
	nftColors = []color.Color{
		color.RGBA{0x99, 0x00, 0x0d, 0xff}, color.RGBA{0xcb, 0x18, 0x1d, 0xff}, color.RGBA{0xef, 0x3b, 0x2c, 0xff},
		color.RGBA{0xfb, 0x6a, 0x4a, 0xff}, color.RGBA{0xd9, 0x48, 0x01, 0xff}, color.RGBA{0xfd, 0x8d, 0x3c, 0xff},
	}
	otherColors = []color.Color{color.RGBA{0x52, 0x52, 0x52, 0xff}, color.RGBA{0x96, 0x96, 0x96, 0xff}, color.RGBA{0x6a, 0x51, 0xa3, 0xff}}
)

// configColors gives each configuration a colour by its family (its name's
// prefix), in order within the family.
func configColors(names []string) map[string]color.Color {
	out := map[string]color.Color{}
	n := map[string]int{}
	for _, c := range names {
		pal, fam := otherColors, "other"
		switch {
		case strings.HasPrefix(c, "sluice-") || strings.HasPrefix(c, "ipf:") || strings.HasPrefix(c, "ipqos:"):
			pal, fam = sluiceColors, "sluice"
		case strings.HasPrefix(c, "nft-"):
			pal, fam = nftColors, "nft"
		}
		out[c] = pal[n[fam]%len(pal)]
		n[fam]++
	}
	return out
}

// charts builds the figures of the model: per suite, the change against
// none of the rate and of the service demand as grouped bars with their
// confidence intervals, for the send-size sweep the absolute throughput
// and service demand per size with their min–max, and the in-kernel ns
// per packet where recorded. A suite or metric without data gives no
// chart (an interrupted run's report has fewer charts, never a failure).
func charts(m *Model) ([]chart, error) {
	var out []chart
	for _, s := range m.Suites {
		var others []string
		for _, c := range s.Configs {
			if c != "none" {
				others = append(others, c)
			}
		}
		if len(others) > 0 && contains(s.Configs, "none") {
			for _, k := range []Metric{Rate, SUTSD} {
				what := "throughput / transaction rate"
				if k == SUTSD {
					what = "service demand (SUT)"
				}
				c, ok := groupedBars(s, others, func(t result.Test, cfg string) (v, lo, hi float64, ok bool) {
					cell, ok := s.Cells[t.ID][cfg]
					if !ok || math.IsNaN(cell[k].Diff) {
						return 0, 0, 0, false
					}
					return cell[k].Diff, cell[k].DiffCI.Lo, cell[k].DiffCI.Hi, true
				})
				if !ok {
					continue
				}
				c.name = fmt.Sprintf("%s-%s-diff", s.Name, metricSlug(k))
				c.title = fmt.Sprintf("%s: change of %s against none (bars: median, whiskers: 95 %% CI)", suiteShort(s.Name), what)
				c.plot.Y.Label.Text = "Δ vs none (%)"
				out = append(out, c)
			}
		}
		if len(s.BPF) > 0 {
			for _, hook := range []string{"ingress", "egress"} {
				var cfgs []string
				for _, cfg := range s.Configs {
					for _, t := range s.Tests {
						if hasHook(s.BPF[t.ID][cfg], hook) && !contains(cfgs, cfg) {
							cfgs = append(cfgs, cfg)
						}
					}
				}
				c, ok := groupedBars(s, cfgs, func(t result.Test, cfg string) (v, lo, hi float64, ok bool) {
					for _, x := range s.BPF[t.ID][cfg] {
						if x.Hook == hook && x.NsPerPkt.N > 0 {
							return x.NsPerPkt.Median, x.NsPerPkt.Min, x.NsPerPkt.Max, true
						}
					}
					return 0, 0, 0, false
				})
				if !ok {
					continue
				}
				c.name = fmt.Sprintf("%s-bpf-%s", s.Name, hook)
				c.title = fmt.Sprintf("%s: in-kernel cost per packet, %s (bars: median, whiskers: min–max)", suiteShort(s.Name), hook)
				c.plot.Y.Label.Text = "ns per packet"
				out = append(out, c)
			}
		}
		if s.Name == "qos" {
			for _, k := range []Metric{Rate, SUTSD} {
				for _, link := range sweepLinks(s) {
					c, ok := sweepLines(s, k, link)
					if !ok {
						continue
					}
					c.name = fmt.Sprintf("%s-%s-sweep", s.Name, metricSlug(k))
					if link != "" {
						c.name += "-" + strings.ToLower(link)
					}
					out = append(out, c)
				}
			}
		}
	}
	return out, nil
}

func hasHook(cs []BPFCost, hook string) bool {
	for _, c := range cs {
		if c.Hook == hook && c.NsPerPkt.N > 0 {
			return true
		}
	}
	return false
}

func suiteShort(name string) string {
	switch name {
	case "ipf":
		return "IPFilter"
	case "qos":
		return "IPQoS"
	case "nat":
		return "NAT gateway"
	}
	return name
}

func metricSlug(k Metric) string {
	return [...]string{"rate", "cpu", "sd", "peer-cpu", "peer-sd"}[k]
}

// barValue gives a bar's value and its whisker ends (NaN: none).
type barValue func(t result.Test, cfg string) (v, lo, hi float64, ok bool)

// groupedBars makes a chart with a group of bars per test, one bar per
// configuration, each with a whisker; ok is false when there is no bar.
func groupedBars(s Suite, cfgs []string, val barValue) (chart, bool) {
	p := plot.New()
	var labels []string
	for _, t := range s.Tests {
		labels = append(labels, t.ID)
	}
	colors := configColors(cfgs)
	leg := plot.NewLegend()
	leg.Top = true
	n := len(cfgs)
	w := 0.8 / float64(max(n, 1))
	var all []*bars
	for i, c := range cfgs {
		b := &bars{color: colors[c], width: w}
		for j, t := range s.Tests {
			v, lo, hi, ok := val(t, c)
			if !ok {
				continue
			}
			x := float64(j) + (float64(i)-float64(n-1)/2)*w
			b.pts = append(b.pts, bar{x: x, y: v, lo: lo, hi: hi})
		}
		if len(b.pts) == 0 {
			continue
		}
		all = append(all, b)
		p.Add(b)
		leg.Add(c, b)
	}
	if len(all) == 0 {
		return chart{}, false
	}
	p.Add(plotter.NewGrid())
	zero := plotter.NewFunction(func(float64) float64 { return 0 })
	zero.Color = color.Black
	zero.Width = vg.Points(0.75)
	p.Add(zero)
	lo, hi := 0.0, 0.0
	for _, b := range all {
		_, _, l, h := b.DataRange()
		lo, hi = math.Min(lo, l), math.Max(hi, h)
	}
	span := math.Max(hi-lo, 1)
	p.Y.Min, p.Y.Max = lo-0.05*span, hi+0.05*span
	p.Y.Tick.Marker = cleanTicks{}
	p.X.Min, p.X.Max = -0.5, float64(len(labels))-0.5
	p.NominalX(labels...)
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YTop
	legW := legendWidth(cfgs)
	return chart{plot: p, w: 11 * vg.Inch, h: 5.5 * vg.Inch, legend: leg, legendW: legW}, true
}

// legendWidth fits the longest name (about 6.5 pt per character at the
// legend's 12 pt) plus the thumbnail.
func legendWidth(names []string) vg.Length {
	l := 0
	for _, n := range names {
		l = max(l, len(n))
	}
	return vg.Points(float64(l)*6.5 + 40)
}

// bar is one bar: its centre x, value y and whisker ends lo..hi (NaN
// for none).
type bar struct{ x, y, lo, hi float64 }

// bars draws bars of one configuration at explicit x positions (in data
// units, so whiskers line up with them) with whiskers.
type bars struct {
	pts   []bar
	color color.Color
	width float64
}

// Plot implements plot.Plotter.
func (b *bars) Plot(c draw.Canvas, p *plot.Plot) {
	tx, ty := p.Transforms(&c)
	whisker := draw.LineStyle{Color: color.Black, Width: vg.Points(0.8)}
	for _, pt := range b.pts {
		x0, x1 := tx(pt.x-b.width/2), tx(pt.x+b.width/2)
		y0, y1 := ty(0), ty(pt.y)
		poly := []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}
		c.FillPolygon(b.color, c.ClipPolygonY(poly))
		if !math.IsNaN(pt.lo) && !math.IsNaN(pt.hi) {
			xm := tx(pt.x)
			capW := (x1 - x0) / 4
			ylo, yhi := ty(pt.lo), ty(pt.hi)
			c.StrokeLine2(whisker, xm, ylo, xm, yhi)
			c.StrokeLine2(whisker, xm-capW, ylo, xm+capW, ylo)
			c.StrokeLine2(whisker, xm-capW, yhi, xm+capW, yhi)
		}
	}
}

// DataRange implements plot.DataRanger: whiskers included.
func (b *bars) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax, ymin, ymax = math.Inf(1), math.Inf(-1), 0, 0
	for _, pt := range b.pts {
		xmin, xmax = math.Min(xmin, pt.x-b.width/2), math.Max(xmax, pt.x+b.width/2)
		for _, v := range []float64{pt.y, pt.lo, pt.hi} {
			if !math.IsNaN(v) {
				ymin, ymax = math.Min(ymin, v), math.Max(ymax, v)
			}
		}
	}
	return
}

// Thumbnail implements plot.Thumbnailer.
func (b *bars) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y}}
	c.FillPolygon(b.color, c.ClipPolygonY(pts))
}

// cleanTicks are gonum's default ticks labelled with as many decimals
// as the step needs and no more (no "20.000").
type cleanTicks struct{}

// Ticks implements plot.Ticker.
func (cleanTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	step := math.Inf(1)
	prev := math.NaN()
	for _, t := range ts {
		if t.Label == "" {
			continue
		}
		if !math.IsNaN(prev) {
			step = math.Min(step, t.Value-prev)
		}
		prev = t.Value
	}
	dec := 0
	if !math.IsInf(step, 0) && step > 0 && step < 1 {
		dec = int(math.Ceil(-math.Log10(step) - 1e-9))
	}
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', dec, 64)
			if ts[i].Label == "-0" {
				ts[i].Label = "0"
			}
		}
	}
	return ts
}

// sweepLinks lists the link profiles of a suite's send-size sweep.
func sweepLinks(s Suite) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range s.Tests {
		if t.Name == "TCP_STREAM" && t.SendSize > 0 && !seen[t.Link] {
			seen[t.Link] = true
			out = append(out, t.Link)
		}
	}
	return out
}

// sweepLines plots a metric against the send size, one line per
// configuration with min–max whiskers, on a log x axis; ok is false when
// nothing positive was measured (a log axis cannot show it).
func sweepLines(s Suite, k Metric, link string) (chart, bool) {
	p := plot.New()
	p.X.Label.Text = "send size (bytes, log scale)"
	p.X.Scale = plot.LogScale{}
	if k == Rate {
		p.Y.Label.Text = "throughput (10^6bits/s)"
	} else {
		p.Y.Label.Text = "service demand, SUT (us/KB)"
	}
	var ticks plot.ConstantTicks
	var sizes []float64
	leg := plot.NewLegend()
	leg.Top = true
	var names []string
	for i, c := range s.Configs {
		var pts plotter.XYs
		var errs plotter.YErrors
		for _, t := range s.Tests {
			if t.Name != "TCP_STREAM" || t.Link != link || t.SendSize <= 0 {
				continue
			}
			cell, ok := s.Cells[t.ID][c]
			if !ok || math.IsNaN(cell[k].Median) || cell[k].Median <= 0 {
				continue
			}
			x := float64(t.SendSize)
			if !slices.Contains(sizes, x) {
				sizes = append(sizes, x)
				ticks = append(ticks, plot.Tick{Value: x, Label: strconv.Itoa(t.SendSize)})
			}
			pts = append(pts, plotter.XY{X: x, Y: cell[k].Median})
			errs = append(errs, struct{ Low, High float64 }{cell[k].Median - cell[k].Min, cell[k].Max - cell[k].Median})
		}
		if len(pts) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			continue
		}
		l.Color = plotutil.Color(i)
		sc.Color = plotutil.Color(i)
		sc.Shape = plotutil.Shape(i)
		p.Add(l, sc)
		if eb, err := plotter.NewYErrorBars(struct {
			plotter.XYer
			plotter.YErrorer
		}{pts, errs}); err == nil {
			eb.Color = plotutil.Color(i)
			p.Add(eb)
		}
		leg.Add(c, l, sc)
		names = append(names, c)
	}
	if len(sizes) == 0 {
		return chart{}, false
	}
	slices.Sort(sizes)
	p.X.Min, p.X.Max = sizes[0]/1.3, sizes[len(sizes)-1]*1.3
	p.X.Tick.Marker = ticks
	p.Y.Tick.Marker = cleanTicks{}
	p.Add(plotter.NewGrid())
	title := "IPQoS: TCP_STREAM send-size sweep, " + p.Y.Label.Text
	if link != "" {
		title += " at " + link
	}
	return chart{title: title + " (points: median, whiskers: min–max)", plot: p, w: 9 * vg.Inch, h: 5 * vg.Inch,
		legend: leg, legendW: legendWidth(names)}, true
}

// WriteCharts renders every chart as PNG and SVG into dir and returns the
// file names (relative to dir), SVG first for each chart.
func WriteCharts(dir string, m *Model) ([]string, error) {
	cs, err := charts(m)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, c := range cs {
		for _, ext := range []string{"svg", "png"} {
			name := c.name + "." + ext
			if err := renderFile(filepath.Join(dir, name), c, ext); err != nil {
				return names, err
			}
			names = append(names, name)
		}
	}
	return names, nil
}

func renderFile(path string, c chart, format string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := render(f, c, format); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// titleH is the height of the title band at the top of a figure.
const titleH = 28

func render(w io.Writer, c chart, format string) (err error) {
	defer func() {
		// gonum panics on plots it cannot draw; a report must not.
		if r := recover(); r != nil {
			err = fmt.Errorf("chart %s: %v", c.name, r)
		}
	}()
	cw, err := draw.NewFormattedCanvas(c.w, c.h, strings.ToLower(format))
	if err != nil {
		return err
	}
	dc := draw.New(cw)
	if c.title != "" {
		sty := c.plot.Title.TextStyle
		sty.Font.Size = vg.Points(13)
		sty.XAlign = draw.XCenter
		sty.YAlign = draw.YCenter
		dc.FillText(sty, vg.Point{X: c.w / 2, Y: c.h - vg.Points(titleH)/2}, c.title)
		dc = draw.Crop(dc, 0, 0, 0, -vg.Points(titleH))
	}
	if c.legendW == 0 {
		c.plot.Draw(dc)
	} else {
		c.plot.Draw(draw.Crop(dc, 0, -c.legendW, 0, 0))
		c.legend.Draw(draw.Crop(dc, c.w-c.legendW+vg.Points(6), 0, 0, -vg.Points(6)))
	}
	_, err = cw.WriteTo(w)
	return err
}
