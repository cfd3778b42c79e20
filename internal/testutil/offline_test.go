package testutil

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestOfflineEnv(t *testing.T) {
	dir := t.TempDir()
	in := []string{"PATH=/bin", EnvBPFDir + "=/sys/fs/bpf/sluice", "HOME=/root", EnvPoolDir + "=/run/sluice/pools", EnvBPFDir + "=/again"}
	env, err := OfflineEnv(in, dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = append(got[k], v)
	}
	if !slices.Equal(got["PATH"], []string{"/bin"}) || !slices.Equal(got["HOME"], []string{"/root"}) {
		t.Errorf("other variables changed: %v", env)
	}
	for _, k := range []string{EnvBPFDir, EnvQoSDir, EnvPoolDir} {
		if len(got[k]) != 1 {
			t.Errorf("%s: %v, want one value", k, got[k])
			continue
		}
		d := got[k][0]
		if !strings.HasPrefix(d, dir+string(filepath.Separator)) {
			t.Errorf("%s=%s: not under %s", k, d, dir)
		}
		ents, err := os.ReadDir(d)
		if err != nil || len(ents) != 0 {
			t.Errorf("%s=%s: %d entries (%v), want an empty directory", k, d, len(ents), err)
		}
	}
	if got[EnvBPFDir][0] == got[EnvQoSDir][0] || got[EnvBPFDir][0] == got[EnvPoolDir][0] {
		t.Errorf("directories shared: %v", env)
	}
}
