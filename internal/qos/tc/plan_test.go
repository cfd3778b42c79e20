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
