// Package cmd_test checks what every command's command line has in common:
// -h prints the complete usage on stdout and exits 0; an unknown option
// prints the usage on stderr and exits 2.
package cmd_test

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"sluice/internal/bench/config"
	"sluice/internal/cmd/ipf"
	"sluice/internal/cmd/ipfstat"
	"sluice/internal/cmd/ipftest"
	"sluice/internal/cmd/ipmon"
	"sluice/internal/cmd/ipnat"
	"sluice/internal/cmd/ippool"
	"sluice/internal/cmd/ipqosadmin"
	"sluice/internal/cmd/sluice"
)

type mainFunc func(args []string, stdin io.Reader, stdout, stderr io.Writer) int

var commands = []struct {
	name  string
	main  mainFunc
	usage string
	bad   []string // an unknown option in the command's own style
}{
	{"ipf", ipf.Main, ipf.Usage, []string{"-Q"}},
	{"ipfstat", ipfstat.Main, ipfstat.Usage, []string{"-Q"}},
	{"ipmon", ipmon.Main, ipmon.Usage, []string{"-Q"}},
	{"ippool", ippool.Main, ippool.Usage, []string{"-Q"}},
	{"ipqosadmin", ipqosadmin.Main, ipqosadmin.Usage, []string{"-bogus"}},
	{"ipnat", ipnat.Main, ipnat.Usage, []string{"-Q"}},
	{"ipftest", func(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
		return ipftest.Main(ipftest.Env{Args: args, Stdin: stdin, Stdout: stdout, Stderr: stderr})
	}, ipftest.Usage, []string{"-Q"}},
	{"sluice", func(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
		return sluice.Main(args, stdout, stderr, config.Datapaths{})
	}, "", []string{"-Q"}},
}

func TestHelpAndUnknownOptions(t *testing.T) {
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := c.main([]string{"-h"}, strings.NewReader(""), &out, &errb); code != 0 {
				t.Errorf("%s -h: exit %d, want 0 (stderr %q)", c.name, code, errb.String())
			}
			help := out.String()
			if !strings.HasPrefix(strings.ToLower(help), "usage") || strings.Count(help, "\n") < 3 {
				t.Errorf("%s -h printed %q, want a usage of several lines", c.name, help)
			}
			if c.usage != "" && help != c.usage {
				t.Errorf("%s -h printed something else than its Usage", c.name)
			}
			out.Reset()
			errb.Reset()
			if code := c.main(c.bad, strings.NewReader(""), &out, &errb); code != 2 {
				t.Errorf("%s %v: exit %d, want 2", c.name, c.bad, code)
			}
			if !strings.Contains(strings.ToLower(errb.String()), "usage") {
				t.Errorf("%s %v: stderr %q has no usage", c.name, c.bad, errb.String())
			}
			if out.Len() != 0 {
				t.Errorf("%s %v wrote %q to stdout", c.name, c.bad, out.String())
			}
		})
	}
}
