package bpf

import "testing"

func TestLinkPin(t *testing.T) {
	for _, c := range []struct {
		name string
		idx  int
		hook string
		ok   bool
	}{
		{"link_3_ingress", 3, "ingress", true},
		{"link_12345_egress", 12345, "egress", true},
		{"link_7_natin", 7, "natin", true},
		{"link_0_ingress", 0, "", false},
		{"link_x_ingress", 0, "", false},
		{"link_3_sideways", 0, "", false},
		{"link_3", 0, "", false},
		{"prog_ingress", 0, "", false},
		{"nat_link_3_ingress", 0, "", false},
	} {
		idx, hook, ok := linkPin(c.name)
		if idx != c.idx || hook != c.hook || ok != c.ok {
			t.Errorf("linkPin(%q) = %d, %q, %v; want %d, %q, %v", c.name, idx, hook, ok, c.idx, c.hook, c.ok)
		}
	}
}
