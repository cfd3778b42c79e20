package conformance

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestShReadLines(t *testing.T) {
	in := "  pass in all  \n\tblock \\\nout all\nlog a\\ b\\\\c \n\nlast-without-newline"
	got := ShReadLines([]byte(in))
	want := []string{"pass in all", "block out all", "log a b\\c", ""}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestFirstDiff(t *testing.T) {
	if got, want := FirstDiff([]byte("a\nb\nc\n"), []byte("a\nx\nc\n")), `line 2: want "b\n", got "x\n"`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if got, want := FirstDiff([]byte("a\n"), []byte("a\nmore\n")), `line 2: want "", got "more\n"`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestLoadManifestAndOptions(t *testing.T) {
	dir := t.TempDir()
	m := "test\tfamily\tdriver\tmode\tinput_format\toutput_format\toptions\tcases\tdefault\tfeatures\tfiles\n" +
		"n12\tn\tn_test\t-\thex\thex\tupdate_ipid=0 -v\t3\tyes\tnat\tregress/n12\n" +
		"f1\tf\tf_test\t-\ttext\ttext\t-\t4\tyes\t-\tregress/f1\n"
	if err := os.WriteFile(filepath.Join(dir, "manifest.tsv"), []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) != 2 || tests[0].Name != "n12" || !reflect.DeepEqual(tests[0].Options, []string{"update_ipid=0", "-v"}) ||
		tests[1].Options != nil {
		t.Fatalf("manifest: %+v", tests)
	}
	if got, want := optArgs(tests[0].Options), []string{"-T", "update_ipid=0", "-v"}; !reflect.DeepEqual(got, want) {
		t.Errorf("optArgs: got %q, want %q", got, want)
	}
	t.Setenv(EnvData, dir)
	if d, err := KitDir(); err != nil || d != dir {
		t.Errorf("KitDir with %s: %q, %v", EnvData, d, err)
	}
	t.Setenv(EnvData, filepath.Join(dir, "nope"))
	if _, err := KitDir(); err == nil {
		t.Error("KitDir accepted a folder without manifest.tsv")
	}
}
