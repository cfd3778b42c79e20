package ipfstat

import (
	"fmt"
	"io"
	"os"
	"time"

	"sluice/internal/ipfctl"
	"sluice/internal/rules/ipf"
)

// source opens the datapath ipfstat reads.
type source func() (ipfctl.Reader, error)

// kernel is the datapath pinned where ipfctl says.
func kernel() (ipfctl.Reader, error) { return ipfctl.OpenReader(ipfctl.PinDir()) }

func report(w io.Writer, stderr io.Writer, f flags, src source) error {
	d, err := src()
	if err != nil {
		return err
	}
	defer d.Close()
	// Sluice: say when interfaces the filter belongs on do not have it,
	// whatever is listed (an unfiltered interface must never go unseen)
	cov, err := d.Coverage()
	if err != nil {
		return err
	}
	if msg := cov.Warning(); msg != "" {
		fmt.Fprintf(stderr, "ipfstat: warning: %s\n", msg)
	}
	set := ipfctl.SetActive
	if f.inactive {
		set = ipfctl.SetInactive
	}
	switch {
	case f.top:
		return top(w, d, f)
	case f.in || f.out || f.acct:
		if !f.in && !f.out {
			// -a alone lists both accounting lists
			f.in, f.out = true, true
		}
		rules, err := d.Rules(set)
		if err != nil {
			return err
		}
		o := listOpts{hits: f.hits || f.acct, bytes: f.acct, numbers: f.numbers, inactive: f.inactive}
		for _, out := range []bool{false, true} {
			if (out && !f.out) || (!out && !f.in) {
				continue
			}
			if !writeRules(w, rules, out, f.acct, o) {
				pre := ""
				if f.inactive {
					pre = "inactive "
				}
				name := "ipfilter"
				if f.acct {
					name = "ipacct"
				}
				if w, ok := w.(interface{ Flush() error }); ok {
					w.Flush()
				}
				fmt.Fprintf(stderr, "# empty list for %s%s(%s)\n", pre, name, dirOf(out))
			}
		}
	case f.state:
		st, err := d.Stats()
		if err != nil {
			return err
		}
		states, err := d.States()
		if err != nil {
			return err
		}
		if f.list {
			writeStateList(w, states)
		} else {
			writeStateStats(w, st, states, d.StateMax(), true)
		}
	case f.groups:
		rules, err := d.Rules(set)
		if err != nil {
			return err
		}
		n := d.ActiveSetNumber()
		if f.inactive {
			n ^= 1
		}
		writeGroups(w, rules, n)
	case f.frags:
		writeFrags(w)
	case f.auth:
		fmt.Fprintf(w, "Authorisation hits: 0\tmisses 0\nnospace 0\nadded 0\tsendfail 0\tsendok 0\nqueok 0\tquefail 0\nexpire 0\n")
	default:
		st, err := d.Stats()
		if err != nil {
			return err
		}
		writeStats(w, st, d.LogFlags(), d.Ticks(), true)
		io.WriteString(w, cov.Lines())
	}
	return nil
}

// top is ipfstat -t: the state table sorted by bytes, redrawn every
// f.topSecs seconds until killed. When the output is not a terminal it
// prints one listing and returns, which makes it scriptable.
func top(w io.Writer, d ipfctl.Reader, f flags) error {
	host, _ := os.Hostname()
	for {
		states, err := d.States()
		if err != nil {
			return err
		}
		if f.tty {
			fmt.Fprint(w, "\033[H\033[2J")
		}
		writeTop(w, host, states, f.closed)
		if bw, ok := w.(interface{ Flush() error }); ok {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
		if !f.tty {
			return nil
		}
		time.Sleep(time.Duration(f.topSecs) * time.Second)
	}
}

func dirOf(out bool) ipf.Direction {
	if out {
		return ipf.DirOut
	}
	return ipf.DirIn
}
