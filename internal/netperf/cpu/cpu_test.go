package cpu

import (
	"math"
	"strings"
	"testing"
)

const stat0 = `cpu  5050 0 2303 58222 192 0 40 8 0 0
cpu0 1000 0 1000 8000 0 0 0 0 0 0
cpu1 0 0 0 10000 0 0 0 0 0 0
intr 1 2 3
`
const stat1 = `cpu  5050 0 2303 58222 192 0 40 8 0 0
cpu0 1300 0 1500 8100 0 0 100 0 0 0
cpu1 0 0 500 10500 0 0 0 0 0 0
`

func TestCompute(t *testing.T) {
	s0, err := Parse(strings.NewReader(stat0))
	if err != nil {
		t.Fatal(err)
	}
	s1, err := Parse(strings.NewReader(stat1))
	if err != nil {
		t.Fatal(err)
	}
	if len(s0) != 2 {
		t.Fatalf("got %d cpus, want 2", len(s0))
	}
	u := Compute(s0, s1, 1)
	// cpu0: total 1000, idle 100 -> 90%; cpu1: total 1000, idle 500 -> 50%.
	if math.Abs(u.Util-70) > 1e-9 || u.PeakID != 0 || math.Abs(u.Peak-90) > 1e-9 {
		t.Errorf("got util %v peak %v@%d, want 70 90@0", u.Util, u.Peak, u.PeakID)
	}
	if math.Abs(u.User-15) > 1e-9 || math.Abs(u.System-50) > 1e-9 || math.Abs(u.SoftIRQ-5) > 1e-9 {
		t.Errorf("got user %v sys %v soft %v", u.User, u.System, u.SoftIRQ)
	}
	if u2 := Compute(s0, s1, 2); math.Abs(u2.Util-140) > 1e-9 {
		t.Errorf("cf=2: got %v, want 140", u2.Util)
	}
}

func TestServiceDemand(t *testing.T) {
	// The README's check: 99.25% at 29802.69 Mbit/s on 2 CPUs = 0.546 us/KB.
	sd := ServiceDemand(99.25, 29802.69e6/8/1024, 2)
	if math.Abs(sd-0.546) > 0.0005 {
		t.Errorf("got %v, want 0.546", sd)
	}
	// TCP_RR captured output: 44.46% at 43798.82 Tr/s on 2 CPUs = 20.302.
	if sd := ServiceDemand(44.46, 43798.82, 2); math.Abs(sd-20.302) > 0.001 {
		t.Errorf("got %v, want 20.302", sd)
	}
}

func TestParseErrors(t *testing.T) {
	if _, err := Parse(strings.NewReader("intr 1\n")); err == nil {
		t.Error("no cpu lines accepted")
	}
	if _, err := Parse(strings.NewReader("cpu0 1 x 3\n")); err == nil {
		t.Error("bad number accepted")
	}
	if _, err := Read(); err != nil {
		t.Errorf("reading the live /proc/stat: %v", err)
	}
}
