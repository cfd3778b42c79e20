package report

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// chart is one figure before rendering.
type chart struct {
	name string // file stem
	plot *plot.Plot
	w, h vg.Length
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
				p, err := diffBars(s, others, k)
				if err != nil {
					return nil, err
				}
				out = append(out, chart{name: fmt.Sprintf("%s-%s-diff", s.Name, metricSlug(k)), plot: p, w: 8 * vg.Inch, h: 4.5 * vg.Inch})
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

func diffBars(s Suite, others []string, k Metric) (*plot.Plot, error) {
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
	width := vg.Points(math.Max(3, 48/float64(len(others))))
	lo, hi := 0.0, 0.0
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
			return nil, fmt.Errorf("chart %s: %w", c, err)
		}
		bars.LineStyle.Width = 0
		bars.Color = plotutil.Color(i)
		bars.Offset = width * vg.Length(float64(i)-float64(len(others)-1)/2)
		p.Add(bars)
		p.Legend.Add(c, bars)
	}
	p.Add(plotter.NewGrid())
	// Room around the bars so the legend (top left) never covers one.
	span := math.Max(hi-lo, 1)
	p.Y.Min, p.Y.Max = lo-0.1*span, hi+0.1*span+0.12*span*float64(len(others))
	p.X.Min, p.X.Max = -0.5, float64(len(labels))-0.5
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(8)
	p.NominalX(labels...)
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign = -0.8
	return p, nil
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
	wt, err := c.plot.WriterTo(c.w, c.h, strings.ToLower(format))
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}
