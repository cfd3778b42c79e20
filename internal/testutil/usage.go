package testutil

import (
	"regexp"
	"testing"
)

// optionWord is an option as usage texts write it: a dash at the start of
// a word (not inside one, as in "re-read").
var optionWord = regexp.MustCompile(`(?:^|[\s\[(|,])(-[A-Za-z0-9?]+)`)

// CheckUsage fails the test when a letter of a getopt optstring is not
// mentioned in usage, either alone ("-f") or in a cluster ("[-46AdD]").
func CheckUsage(t testing.TB, usage, optstring string) {
	t.Helper()
	seen := map[byte]bool{}
	for _, m := range optionWord.FindAllStringSubmatch(usage, -1) {
		w := m[1]
		for i := 1; i < len(w); i++ {
			seen[w[i]] = true
		}
	}
	for i := 0; i < len(optstring); i++ {
		if c := optstring[i]; c != ':' && !seen[c] {
			t.Errorf("usage does not mention -%c:\n%s", c, usage)
		}
	}
}
