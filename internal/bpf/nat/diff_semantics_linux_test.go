//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package nat

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrivilegedDifferentialSemantics runs the NAT cases of ipftest's
// semantics suite (internal/cmd/ipftest/testdata/semantics: IPFilter
// behaviours written from its semantics, each checked against the real
// tools) through the Go engine and the kernel programs (diffRun: the same
// packets out, drops, sessions and host maps). Only the cases that run NAT
// alone are taken (no filter rules, pools or tunables). Each case listed
// in semanticsWant must also have the engine translate exactly that many
// packets, so that it cannot pass by being left alone on both sides.
func TestPrivilegedDifferentialSemantics(t *testing.T) {
	h := newHarness(t)
	root := filepath.Join("..", "..", "cmd", "ipftest", "testdata", "semantics")
	dirs, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var ran, packets int
	seen := map[string]bool{}
	for _, d := range dirs {
		name := d.Name()
		args, err := os.ReadFile(filepath.Join(root, name, "args"))
		if err != nil {
			continue
		}
		format, ok := natOnlyArgs(string(args))
		if !ok {
			continue
		}
		seen[name] = true
		if why, ok := semanticsKernelPending[name]; ok {
			t.Logf("%s left out: %s", name, why)
			continue
		}
		rules, err := os.ReadFile(filepath.Join(root, name, "ipnat.conf"))
		if err != nil {
			t.Fatal(err)
		}
		input, err := os.ReadFile(filepath.Join(root, name, "pkts"))
		if err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) {
			before := translatedCount
			var n int
			err := h.do(func() error {
				var err error
				n, err = diffRun(h, strings.TrimRight(string(rules), "\n"), format, input)
				return err
			})
			if errors.Is(err, ErrUnsupported) {
				t.Logf("refused as unsupported: %v", err)
				return
			}
			if err != nil {
				t.Fatalf("rules:\n%s%v", rules, err)
			}
			ran++
			packets += n
			if want, ok := semanticsWant[name]; ok && translatedCount-before != want {
				t.Errorf("the engine translated %d packets, want %d", translatedCount-before, want)
			}
		})
	}
	for name := range semanticsWant {
		if !seen[name] {
			t.Errorf("semanticsWant names %s, not a NAT-only semantics case", name)
		}
	}
	for name := range semanticsKernelPending {
		if !seen[name] {
			t.Errorf("semanticsKernelPending names %s, not a NAT-only semantics case", name)
		}
	}
	t.Logf("NAT semantics cases through both: %d (%d packets)", ran, packets)
	if ran == 0 {
		t.Error("no semantics case compared")
	}
}

// natOnlyArgs reports whether a semantics case's ipftest arguments run NAT
// alone on a packet file, and the file's format.
func natOnlyArgs(args string) (format string, ok bool) {
	var words []string
	for _, l := range strings.Split(args, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			words = append(words, strings.Fields(l)...)
		}
	}
	format = "text"
	nat := false
	for i := 0; i < len(words); i++ {
		switch words[i] {
		case "-6", "-R", "-b", "-x", "-D":
		case "-N":
			nat = true
			i++
		case "-i":
			i++
		case "-F":
			if i+1 < len(words) {
				format = words[i+1]
			}
			i++
		default:
			return "", false
		}
	}
	return format, nat
}

// semanticsWant: how many packets of a case the engine translates (read
// from its want file), for the cases written for a kernel change.
var semanticsWant = map[string]int{
	"nat-frag-icmp-error-session-end":      4,
	"nat-frag-nonquery-icmp-no-entry":      7,
	"nat-frag-first-entry-kept":            4,
	"nat-frag-key-copied-options":          12,
	"nat6-ah-ext-header":                   7,
	"nat6-cut-ext-proto-none":              1,
	"nat-rdr-icmp-clash-type-word":         5,
	"nat-icmp-short-query":                 6,
	"nat6-rewrite-in-icmp6-error-dst-only": 2,
}

// semanticsKernelPending: NAT semantics cases whose IPFilter behaviour the
// engine has and the kernel NAT (internal/bpf/nat/c) does not have yet,
// each with what the C needs.
var semanticsKernelPending = map[string]string{}
