package ipftest

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMcastGrid: every sequence of up to five packets of a stream to a
// multicast group, outbound (O) and inbound (I, the same packet), for a
// UDP and an ICMP echo stream, IPv4 and IPv6, with an outbound keep state
// rule and with an inbound one beside it. testdata/mcastgrid/want is
// IPFilter's ipftest output for each (gen.py writes it), condensed to the
// verdicts and the listed entries' flows and packet counts; Sluice's must
// be the same, but for the kinds marked `verdicts`, whose tables differ
// by Sluice's one entry a flow (docs/ipfilter-differences.md, "Faithful,
// session 21"). Before faith21 Sluice made an entry every second outbound
// packet and let inbound packets to the group find the fresh ones.
func TestMcastGrid(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "mcastgrid", "want"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		kind, cmp string
		rules     []string
		pkt       []byte
		n         int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		word, rest, _ := strings.Cut(l, " ")
		switch word {
		case "#":
			continue
		case "kind":
			kind, cmp, _ = strings.Cut(rest, " ")
			rules = nil
			continue
		case "rule":
			rules = append(rules, rest)
			continue
		case "pkt":
			if pkt, err = hex.DecodeString(rest); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want := strings.TrimSpace(rest)
		got := strings.TrimSpace(mcastGridRun(t, rules, pkt, word))
		if cmp == "verdicts" {
			want, _, _ = strings.Cut(want, " |")
			got, _, _ = strings.Cut(got, " |")
		}
		if got != want {
			t.Errorf("%s %s (%s):\n got %s\nwant %s", kind, word, strings.Join(rules, "; "), got, want)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 8*62 {
		t.Errorf("%d sequences, want %d", n, 8*62)
	}
}

// mcastGridRun runs ipftest -R -b -D on the packet sent in the directions
// seq gives and condenses its output as gen.py's condense.
func mcastGridRun(t *testing.T, rules []string, pkt []byte, seq string) string {
	t.Helper()
	var in strings.Builder
	h := hex.EncodeToString(pkt)
	for _, c := range seq {
		dir := "in"
		if c == 'O' {
			dir = "out"
		}
		fmt.Fprintf(&in, "[%s,nic0]\n", dir)
		for i := 0; i < len(h); i += 4 {
			in.WriteString(h[i:min(i+4, len(h))])
			if i+4 >= len(h) || (i/4)%8 == 7 {
				in.WriteString("\n")
			} else {
				in.WriteString(" ")
			}
		}
		in.WriteString("\n")
	}
	files := map[string]string{"ipf.conf": strings.Join(rules, "\n") + "\n", "pkts": in.String()}
	open := func(name string) (io.ReadCloser, error) {
		s, ok := files[name]
		if !ok {
			return nil, os.ErrNotExist
		}
		return io.NopCloser(strings.NewReader(s)), nil
	}
	var out, errb bytes.Buffer
	Main(Env{Args: strings.Fields("-R -b -D -r ipf.conf -F hex -i pkts"), Stdin: strings.NewReader(""),
		Stdout: &out, Stderr: &errb, Open: open})
	return mcastGridCondense(out.String())
}

var (
	gridEntry = regexp.MustCompile(`^\d+:\d+ src:`)
	gridPkts  = regexp.MustCompile(`pkts (\d+)`)
)

func mcastGridCondense(out string) string {
	lines := strings.Split(out, "\n")
	var verdicts []string
	for _, l := range lines {
		if strings.HasPrefix(l, "List of active MAP") {
			break
		}
		verdicts = append(verdicts, strings.TrimSpace(l))
	}
	var ents [][]string
	on := false
	for _, l := range lines {
		if strings.HasPrefix(l, "List of active state sessions:") {
			on = true
			continue
		}
		if strings.HasPrefix(l, "List of configured pools") {
			on = false
		}
		if !on {
			continue
		}
		if gridEntry.MatchString(l) {
			ents = append(ents, []string{strings.TrimSpace(l)})
		} else if len(ents) > 0 && (strings.Contains(l, "FWD:") || strings.Contains(l, "REV:")) {
			name, _, _ := strings.Cut(l, ":")
			var n []string
			for _, m := range gridPkts.FindAllStringSubmatch(l, -1) {
				n = append(n, m[1])
			}
			ents[len(ents)-1] = append(ents[len(ents)-1], strings.TrimSpace(name)+" "+strings.Join(n, "/"))
		}
	}
	var es []string
	for _, e := range ents {
		es = append(es, strings.Join(e, " "))
	}
	return strings.Join(verdicts, " ") + " | " + strings.Join(es, " ; ")
}
