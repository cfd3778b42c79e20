package tc

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"sluice/internal/qos"
	"sluice/internal/rules/ipqos"
)

func adapter(t *testing.T, src string) *qos.Adapter {
	t.Helper()
	cfg, err := ipqos.Parse("t", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := qos.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rs.Adapters[0]
}

func TestNewPlan(t *testing.T) {
	a := adapter(t, `
filter f {
}
policy gold {
    uses f
    res 30%
    max 50%
}
policy capped {
    uses f
    max 2m
}
policy mark_only {
    uses f
    dscp 1
}
policy fixed {
    uses f
    res 10m
}
adapter eth0 {
    uses gold
    uses capped
    uses mark_only
    uses fixed
}
`)
	p, err := NewPlan(a, 100e6)
	if err != nil {
		t.Fatal(err)
	}
	// Unreserved: 100 - 30 - 10 = 60 Mbit/s shared by `capped` and the
	// default class.
	want := &Plan{Ifname: "eth0", Link: 100e6, Classes: []Class{
		{Minor: qos.FirstClass, Policy: "gold", Rate: 30e6, Ceil: 50e6},
		{Minor: qos.FirstClass + 1, Policy: "capped", Rate: 2e6, Ceil: 2e6},
		{Minor: qos.FirstClass + 3, Policy: "fixed", Rate: 10e6, Ceil: 100e6},
	}, Default: Class{Minor: qos.DefaultClass, Rate: 30e6, Ceil: 100e6}}
	if d := cmp.Diff(want, p); d != "" {
		t.Errorf("plan (-want +got):\n%s", d)
	}
}

func TestNewPlanErrors(t *testing.T) {
	src := `
filter f {
}
policy p {
    uses f
    res 80m
}
adapter eth0 {
    uses p
}
`
	a := adapter(t, src)
	if _, err := NewPlan(a, 0); err == nil || !strings.Contains(err.Error(), "link speed unknown") {
		t.Errorf("unknown link speed: got %v", err)
	}
	if _, err := NewPlan(a, 50e6); err == nil || !strings.Contains(err.Error(), "more than the link") {
		t.Errorf("over-reservation: got %v", err)
	}
	none := adapter(t, "filter f {\n}\npolicy p {\n uses f\n dscp 3\n}\nadapter eth0 {\n uses p\n}\n")
	if p, err := NewPlan(none, 1e9); p != nil || err != nil {
		t.Errorf("no shaping policy: got %v, %v, want nil, nil", p, err)
	}
}

// TestDeclaredSpeed: an adapter's declared speed (the ipqos `speed`
// extension) survives compilation and is what res/max percentages
// resolve against.
func TestDeclaredSpeed(t *testing.T) {
	cfg, err := ipqos.Parse("speed.conf", []byte("filter f {\n protocol 6\n}\npolicy p {\n uses f\n res 10%\n max 50%\n}\nadapter veth0 {\n speed 1G\n uses p\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := qos.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := rs.Adapters[0]
	if a.Speed != 1_000_000_000 {
		t.Fatalf("compiled speed %d, want 1e9", a.Speed)
	}
	pl, err := NewPlan(a, a.Speed)
	if err != nil {
		t.Fatal(err)
	}
	if c := pl.Classes[0]; c.Rate != 100_000_000 || c.Ceil != 500_000_000 || pl.Link != 1_000_000_000 {
		t.Errorf("plan %+v, want rate 1e8, ceil 5e8 on a 1e9 link", pl)
	}
}
