package report

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// chart is one figure before rendering.
type chart struct {
	name string // file stem
	plot *plot.Plot
	w, h vg.Length
	// legend, if legendW > 0, is drawn in a strip that wide right of
	// the plot, where it covers no bar however many configurations
	// there are.
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
// none of the rate and of the service demand as grouped bars, and for the
// send-size sweep the absolute throughput and service demand per size.
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
				p, leg, err := diffBars(s, others, k)
				if err != nil {
					return nil, err
				}
				out = append(out, chart{name: fmt.Sprintf("%s-%s-diff", s.Name, metricSlug(k)), plot: p, w: 10 * vg.Inch, h: 5 * vg.Inch,
					legend: leg, legendW: 1.9 * vg.Inch})
			}
		}
		if s.Name == "qos" {
			for _, k := range []Metric{Rate, SUTSD} {
				p, err := sweepLines(s, k)
				if err != nil {
					return nil, err
				}
				out = append(out, chart{name: fmt.Sprintf("%s-%s-sweep", s.Name, metricSlug(k)), plot: p, w: 7 * vg.Inch, h: 4.5 * vg.Inch})
			}
		}
	}
	return out, nil
}

var suiteShort = map[string]string{"ipf": "IPFilter", "qos": "IPQoS"}

func metricSlug(k Metric) string {
	return [...]string{"rate", "cpu", "sd", "peer-cpu", "peer-sd"}[k]
}

func diffBars(s Suite, others []string, k Metric) (*plot.Plot, plot.Legend, error) {
	p := plot.New()
	what := "throughput / transaction rate"
	if k == SUTSD {
		what = "service demand (SUT)"
	}
	p.Title.Text = fmt.Sprintf("%s: change of %s against none", suiteShort[s.Name], what)
	p.Y.Label.Text = "Δ vs none (%)"
	var labels []string
	for _, t := range s.Tests {
		labels = append(labels, t.ID)
	}
	width := vg.Points(math.Max(3, 56/float64(len(others))))
	lo, hi := 0.0, 0.0
	colors := configColors(others)
	leg := plot.NewLegend()
	leg.Top = true
	for i, c := range others {
		vals := make(plotter.Values, len(s.Tests))
		for j, t := range s.Tests {
			v := 0.0
			if cell, ok := s.Cells[t.ID][c]; ok && !math.IsNaN(cell[k].Diff) {
				v = cell[k].Diff
			}
			vals[j] = v
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, leg, fmt.Errorf("chart %s: %w", c, err)
		}
		bars.LineStyle.Width = 0
		bars.Color = colors[c]
		bars.Offset = width * vg.Length(float64(i)-float64(len(others)-1)/2)
		p.Add(bars)
		leg.Add(c, bars)
	}
	p.Add(plotter.NewGrid())
	zero := plotter.NewFunction(func(float64) float64 { return 0 })
	zero.Color = color.Black
	zero.Width = vg.Points(0.75)
	p.Add(zero)
	span := math.Max(hi-lo, 1)
	p.Y.Min, p.Y.Max = lo-0.05*span, hi+0.05*span
	p.X.Min, p.X.Max = -0.5, float64(len(labels))-0.5
	p.NominalX(labels...)
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign = -0.8
	return p, leg, nil
}

func sweepLines(s Suite, k Metric) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "TCP_STREAM send-size sweep"
	p.X.Label.Text = "send size (bytes)"
	p.X.Scale = plot.LogScale{}
	var ticks plot.ConstantTicks
	for _, t := range s.Tests {
		if t.SendSize > 0 {
			ticks = append(ticks, plot.Tick{Value: float64(t.SendSize), Label: fmt.Sprint(t.SendSize)})
		}
	}
	p.X.Tick.Marker = ticks
	if k == Rate {
		p.Y.Label.Text = "throughput (10^6bits/s)"
	} else {
		p.Y.Label.Text = "service demand, SUT (us/KB)"
	}
	for i, c := range s.Configs {
		var pts plotter.XYs
		for _, t := range s.Tests {
			cell, ok := s.Cells[t.ID][c]
			if !ok || t.SendSize <= 0 || math.IsNaN(cell[k].Median) {
				continue
			}
			pts = append(pts, plotter.XY{X: float64(t.SendSize), Y: cell[k].Median})
		}
		if len(pts) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, fmt.Errorf("chart %s: %w", c, err)
		}
		l.Color = plotutil.Color(i)
		sc.Color = plotutil.Color(i)
		sc.Shape = plotutil.Shape(i)
		p.Add(l, sc)
		p.Legend.Add(c, l, sc)
	}
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	return p, nil
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

func render(w io.Writer, c chart, format string) error {
	cw, err := draw.NewFormattedCanvas(c.w, c.h, strings.ToLower(format))
	if err != nil {
		return err
	}
	dc := draw.New(cw)
	if c.legendW == 0 {
		c.plot.Draw(dc)
	} else {
		c.plot.Draw(draw.Crop(dc, 0, -c.legendW, 0, 0))
		// The strip starts a little below the title, level with the
		// plot's top.
		c.legend.Draw(draw.Crop(dc, c.w-c.legendW+vg.Points(6), 0, 0, -vg.Points(28)))
	}
	_, err = cw.WriteTo(w)
	return err
}
