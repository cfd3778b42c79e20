package cmd_test

// The bad-input corpus: malformed files of every language (ipf.conf,
// ipnat.conf, ippool.conf, ipqos.conf), binary junk, huge lines and
// tokens, deep nesting, and 200 000 rules with an error at the end, run
// through the commands that read them. Every run must end with a clear
// error and a non-zero exit, never a panic or a hang, in bounded memory.
// Each run is a child process (this test binary re-executed), so that a
// panic or a runaway allocation is its alone and its peak RSS can be read.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"sluice/internal/bench/config"
	"sluice/internal/cmd/ipf"
	"sluice/internal/cmd/ipftest"
	"sluice/internal/cmd/ipmon"
	"sluice/internal/cmd/ipnat"
	"sluice/internal/cmd/ippool"
	"sluice/internal/cmd/ipqosadmin"
	"sluice/internal/cmd/sluice"
	"sluice/internal/testutil"
)

// childEnv marks a child run; its command line follows "--" among the
// test binary's arguments.
const childEnv = "SLUICE_BADINPUT_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		for i, a := range os.Args {
			if a == "--" && i+1 < len(os.Args) {
				os.Exit(runCommand(os.Args[i+1], os.Args[i+2:]))
			}
		}
		os.Exit(3)
	}
	os.Exit(testutil.RunOffline(m))
}

// runCommand runs one command's Main in this process, with no kernel
// datapath in reach (the pins point nowhere).
func runCommand(name string, args []string) int {
	in, out, errw := os.Stdin, io.Writer(os.Stdout), io.Writer(os.Stderr)
	switch name {
	case "ipf":
		return ipf.Main(args, in, out, errw)
	case "ipnat":
		return ipnat.Main(args, in, out, errw)
	case "ippool":
		return ippool.Main(args, in, out, errw)
	case "ipqosadmin":
		return ipqosadmin.Main(args, in, out, errw)
	case "ipmon":
		return ipmon.Main(args, in, out, errw)
	case "ipftest":
		return ipftest.Main(ipftest.Env{Args: args, Stdin: in, Stdout: out, Stderr: errw})
	case "sluice":
		return sluice.Main(args, out, errw, config.Datapaths{})
	}
	fmt.Fprintf(errw, "no command %s\n", name)
	return 3
}

// maxRSS bounds the peak resident memory of one run. The biggest input is
// 200 000 rules (about 10 MB of text); a parser that keeps a few hundred
// bytes per rule stays far below this.
const maxRSS = 512 << 20

// corpus writes the malformed files into dir and returns them by language.
func corpus(t *testing.T, dir string) map[string][]string {
	t.Helper()
	r := rand.New(rand.NewPCG(10, 14))
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	junk := make([]byte, 64<<10)
	for i := range junk {
		junk[i] = byte(r.Uint32())
	}
	// the same shapes of damage for every language
	common := func(lang, valid string) []string {
		var files []string
		add := func(kind string, data []byte) { files = append(files, write(lang+"-"+kind, data)) }
		add("junk", junk)
		add("nul", []byte(strings.ReplaceAll(valid, " ", "\x00")))
		add("utf8", append([]byte(valid[:len(valid)/2]), 0xff, 0xfe, 0xc3, '\n'))
		add("hugeline", bytes.Repeat([]byte("x "), 2<<20))
		add("hugeword", append(append([]byte(valid), bytes.Repeat([]byte("9"), 4<<20)...), '\n'))
		add("truncated", []byte(valid[:len(valid)/2]))
		add("manyerrors", bytes.Repeat([]byte("@@@ bogus ;\n"), 500000))
		add("nesting", append(bytes.Repeat([]byte("{ ( "), 200000), '\n'))
		return files
	}
	var rules200k strings.Builder
	for i := 0; i < 200000; i++ {
		fmt.Fprintf(&rules200k, "pass in quick proto tcp from 10.%d.%d.%d to any port = %d\n", i>>16&255, i>>8&255, i&255, 1+i%65535)
	}
	rules200k.WriteString("pass in from 1.2.3.4/33 to any\n")
	var nat200k strings.Builder
	for i := 0; i < 200000; i++ {
		fmt.Fprintf(&nat200k, "map eth0 10.%d.%d.0/24 -> 192.0.2.1/32\n", i>>8&255, i&255)
	}
	nat200k.WriteString("map eth0 -> \n")
	var pool200k strings.Builder
	pool200k.WriteString("table role = ipf type = tree number = 1 {")
	for i := 0; i < 200000; i++ {
		fmt.Fprintf(&pool200k, " 10.%d.%d.%d/32;", i>>16&255, i>>8&255, i&255)
	}
	pool200k.WriteString(" 1.2.3.4/40; };\n")
	var qos200k strings.Builder
	for i := 0; i < 200000; i++ {
		fmt.Fprintf(&qos200k, "filter f%d {\n  srcport %d\n}\n", i, 1+i%65535)
	}
	qos200k.WriteString("filter bad {\n  srcport x\n}\n")
	vars := "a=\"$b$b$b$b\";\nb=\"$c$c$c$c\";\nc=\"$d$d$d$d\";\nd=\"$e$e$e$e\";\ne=\"$f$f$f$f\";\nf=\"$g$g$g$g\";\ng=\"$h$h$h$h\";\nh=\"$i$i$i$i\";\ni=\"pass in all \";\n$a\nbogus\n"
	return map[string][]string{
		"ipf": append(common("ipf", "pass in quick proto tcp from any to any port = 22 keep state\n"),
			write("ipf-200k", []byte(rules200k.String())), write("ipf-vars", []byte(vars))),
		"ipnat":  append(common("ipnat", "map eth0 10.0.0.0/8 -> 192.0.2.1/32 portmap tcp/udp 1024:65535\n"), write("ipnat-200k", []byte(nat200k.String()))),
		"ippool": append(common("ippool", "table role = ipf type = tree number = 100 { 1.1.1.1/32; 2.2.0.0/16; };\n"), write("ippool-200k", []byte(pool200k.String()))),
		"ipqos":  append(common("ipqos", "filter web {\n  dstport 80\n  protocol tcp\n}\n"), write("ipqos-200k", []byte(qos200k.String()))),
	}
}

// run runs one command line as a child and returns its exit code, stderr
// and peak RSS.
func run(t *testing.T, stdin string, args ...string) (int, string, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
	c.Env = append(os.Environ(), childEnv+"=1",
		"SLUICE_BPF_DIR="+filepath.Join(t.TempDir(), "no-pins"), "SLUICE_POOL_DIR="+filepath.Join(t.TempDir(), "no-pools"))
	c.Stdin = strings.NewReader(stdin)
	var errb bytes.Buffer
	c.Stdout, c.Stderr = io.Discard, &errb
	err := c.Run()
	if ctx.Err() != nil {
		t.Fatalf("%v: still running after 2 minutes", args)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	rss := c.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	return code, errb.String(), rss
}

func TestBadInputCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every command on some 40 large files")
	}
	dir := t.TempDir()
	files := corpus(t, dir)
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o644)
	// each language through every command that reads it
	var runs [][]string
	for _, f := range files["ipf"] {
		runs = append(runs, []string{"ipf", "-nf", f}, []string{"ipftest", "-r", f, "-i", empty})
	}
	for _, f := range files["ipnat"] {
		runs = append(runs, []string{"ipnat", "-nf", f}, []string{"ipftest", "-N", f, "-i", empty})
	}
	for _, f := range files["ippool"] {
		runs = append(runs, []string{"ippool", "-n", "-f", f}, []string{"ipftest", "-P", f, "-r", empty, "-i", empty})
	}
	for _, f := range files["ipqos"] {
		runs = append(runs, []string{"ipqosadmin", "-verify", "-f", f})
	}
	// and junk where log records, packets for ipqosadmin -test and bench
	// results are read
	junk := filepath.Join(dir, "ipf-junk")
	runs = append(runs,
		[]string{"ipmon", "-f", junk},
		[]string{"ipqosadmin", "-test", "-f", filepath.Join(dir, "ipqos-truncated"), "-i", junk},
		[]string{"sluice", "report", junk},
	)
	// where the one error of the 200 000-rule files is
	lastLine := map[string]string{"ipf-200k": "ipf-200k:200001:", "ipnat-200k": "ipnat-200k:200001:", "ipqos-200k": "ipqos-200k:600002:"}
	var maxSeen int64
	for _, args := range runs {
		name := strings.Join(args, " ")
		name = strings.ReplaceAll(name, dir+"/", "")
		t.Run(name, func(t *testing.T) {
			code, stderr, rss := run(t, "", args...)
			maxSeen = max(maxSeen, rss)
			if code == 0 {
				t.Errorf("exit 0, want an error")
			}
			if code > 2 || strings.Contains(stderr, "panic:") || strings.Contains(stderr, "goroutine ") {
				t.Errorf("exit %d, stderr:\n%.2000s", code, stderr)
			}
			if strings.TrimSpace(stderr) == "" {
				t.Errorf("exit %d with nothing on stderr", code)
			}
			// a rule-file error says where: the file name, and a line
			// number in every error of a file that is text at all
			if base := filepath.Base(args[len(args)-1]); !strings.Contains(stderr, filepath.Base(base)) &&
				!strings.Contains(name, "junk") && !strings.Contains(name, "-i") {
				t.Errorf("stderr does not name the file:\n%.1000s", stderr)
			}
			if strings.Count(stderr, "\n") > 40 {
				t.Errorf("%d lines of errors; the parsers stop after ten", strings.Count(stderr, "\n"))
			}
			if rss > maxRSS {
				t.Errorf("peak RSS %d MiB, more than %d MiB", rss>>20, maxRSS>>20)
			}
			// the error after 200 000 good rules is reported at its line
			if want, ok := lastLine[filepath.Base(args[len(args)-1])]; ok && !strings.Contains(stderr, want) {
				t.Errorf("stderr %.300q does not point at %q", stderr, want)
			}
		})
	}
	t.Logf("%d runs, largest peak RSS %d MiB", len(runs), maxSeen>>20)
}
