package topo

import "testing"

func TestProfiles(t *testing.T) {
	for in, want := range map[string]string{"": "veth", "none": "veth", "100m": "100BaseT", "100BaseT": "100BaseT",
		"1g": "1GigE", "1GIGE": "1GigE", "gige": "1GigE", "10g": "10GigE", "10GigE": "10GigE"} {
		p, err := ParseProfile(in)
		if err != nil || p.Name != want {
			t.Errorf("ParseProfile(%q) = %+v, %v; want %s", in, p, err, want)
		}
		if q, ok := ProfileByName(p.Name); !ok || q != p {
			t.Errorf("ProfileByName(%q) = %+v", p.Name, q)
		}
	}
	for _, bad := range []string{"2g", "fast", "100"} {
		if _, err := ParseProfile(bad); err == nil {
			t.Errorf("ParseProfile(%q) accepted", bad)
		}
	}
	for _, p := range Profiles[1:] {
		rate, burst, limit := p.TBF()
		if rate*8 != p.BitsPerSec || burst < 64<<10 || limit <= burst {
			t.Errorf("%s: rate %d B/s, burst %d, limit %d", p.Name, rate, burst, limit)
		}
	}
}
