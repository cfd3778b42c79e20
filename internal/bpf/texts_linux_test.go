package bpf

import (
	"math/rand/v2"
	"strings"
	"testing"

	"sluice/internal/rules/ipf"
)

// TestFormatTexts: the texts a compile keeps for ipfstat (printed into
// shared arenas on every CPU) are ipf.FormatRule's, rule by rule, for
// random sets of over 10 000 rules (several workers, several arenas).
func TestFormatTexts(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 1))
	var src strings.Builder
	for src.Len() < 1<<20 {
		src.WriteString(randomRules(r))
		src.WriteString(randomRunRules(r))
	}
	rules, err := ipf.Parse("random", []byte(src.String()), ipf.ParseOptions{NoResolve: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) < 10001 {
		t.Fatalf("only %d rules", len(rules))
	}
	got := formatTexts(rules, nil)
	total := 0
	for i, ir := range rules {
		if want := ipf.FormatRule(ir); got[i] != want {
			t.Fatalf("rule %d: got %q, want %q", i, got[i], want)
		}
		total += len(got[i])
	}
	if total <= 2*textArena {
		t.Errorf("%d bytes of text: the arenas were not crossed", total)
	}
	// a custom printer is used as it is
	custom := formatTexts(rules[:3], func(r *ipf.Rule) string { return "x" })
	if strings.Join(custom, ",") != "x,x,x" {
		t.Errorf("custom texts: %q", custom)
	}
}

// TestTextBlob: texts packed into chunks (lengths first, texts across
// chunk boundaries, empty ones, one cut at 65 535 bytes) unpack to
// themselves.
func TestTextBlob(t *testing.T) {
	var texts []string
	for i := 0; i < 3000; i++ {
		texts = append(texts, strings.Repeat(string(rune('a'+i%26)), i%97))
	}
	texts = append(texts, strings.Repeat("z", 70000), "end")
	chunks := textBlob(texts)
	n := 0
	for _, s := range texts {
		n += 2 + min(len(s), 0xffff)
	}
	if want := (n + textChunk - 1) / textChunk; len(chunks) != want {
		t.Fatalf("%d chunks, want %d", len(chunks), want)
	}
	var b []byte
	for i := range chunks {
		b = append(b, chunks[i].B[:]...)
	}
	out := make([]string, len(texts))
	unpackTexts(b, out)
	for i, s := range texts {
		if len(s) > 0xffff {
			s = s[:0xffff]
		}
		if out[i] != s {
			t.Fatalf("text %d: got %d bytes, want %d", i, len(out[i]), len(s))
		}
	}
	if len(textBlob(nil)) != 0 {
		t.Error("no texts made chunks")
	}
}
