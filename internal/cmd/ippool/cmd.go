// Package ippool is the ippool command: loading, checking and printing
// ippool.conf files, and the table management commands of IPFilter's
// ippool(8). The kernel's tables are reached through an
// ipfctl.PoolDevice.
package ippool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net/netip"
	"strconv"
	"strings"

	"sluice/internal/getopt"
	"sluice/internal/ipfctl"
	"sluice/internal/rulefile"
	"sluice/internal/rules/ippool"
	"sluice/internal/rules/netfmt"
)

// ErrNoDevice is returned by commands that need a loaded packet filter
// (the IPFilter /dev/iplookup device) when there is none.
var ErrNoDevice = fmt.Errorf("/dev/iplookup: no kernel lookup device (use -n to check a file offline): %w", errors.ErrUnsupported)

// Command is one ippool run.
type Command struct {
	// Device is the kernel store; nil means there is none (every command
	// but -n checks fails with ErrNoDevice).
	Device         ipfctl.PoolDevice
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Usage is ippool's complete usage text (-h).
const Usage = `usage: ippool [-dnv] -f <file> [-R] [-u]
       ippool [-dnv] -a [-i <ipaddr>[/netmask]] [-m <name>] [-o <role>] [-t <type>] [-T ttl]
       ippool [-dnv] -A [-m <name>] [-o <role>] [-S <seed>] [-t <type>]
       ippool [-dnv] -F [-o <role>] [-t <type>]
       ippool [-dnv] -l [-m <name>] [-o <role>] [-t <type>]
       ippool [-dnv] -r [-i <ipaddr>[/netmask]] [-m <name>] [-o <role>]
       ippool [-dnv] -R [-m <name>] [-o <role>] [-t <type>]
       ippool [-dnv] -s [-m <name>] [-o <role>] [-t <type>]
       ippool -h
  -f file  load (with -u unload) the tables of an ippool.conf ("-": stdin)
  -a / -r  add / remove the address -i to / from table -m
  -A / -R  create / remove table -m
  -F       flush tables;  -l list them;  -s statistics
  -n       check only, change nothing;  -v verbose;  -d debug
  -o role  ipf, nat, auth, count or all;  -t type  tree, hash, group-map, dstlist
  -S seed, -T ttl  hash seed, entry lifetime
  -z       zero statistics (not supported);  -M core, -N namelist, -O fields:
           accepted for IPFilter compatibility, no effect
All the files of a -f load are checked first; the tables change only when
every one is good, all at once, and the rules that use them are reloaded.
`

const optString = "aAdf:Fhi:lm:M:nN:o:O:rRsS:t:T:uvz"

// Main runs ippool with args (without the program name) on the table
// store and datapath ipfctl finds (ipfctl.PinDir, ipfctl.PoolDir) and
// returns the exit status: 0 done, 1 an error, 2 a usage error.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &Command{Device: ipfctl.PoolBackend(ipfctl.PinDir(), ""), Stdin: stdin, Stdout: stdout, Stderr: stderr}
	return c.Run(args)
}

// Run runs ippool with args (without the program name) and returns the
// exit status.
func (c *Command) Run(args []string) int {
	stdin, stdout, stderr := c.Stdin, c.Stdout, c.Stderr
	if len(args) == 0 {
		fmt.Fprint(stderr, Usage)
		return 2
	}
	// The first command letter picks the mode, as in the original; all
	// options share one getopt pass here.
	opts, _, err := getopt.Parse(args, optString)
	if err != nil {
		fmt.Fprintf(stderr, "ippool: %v\n", err)
		fmt.Fprint(stderr, Usage)
		return 2
	}
	for _, o := range opts {
		if o.Flag == 'h' {
			fmt.Fprint(stdout, Usage)
			return 0
		}
	}
	var cmd, other byte
	var noLoad, verbose, unload bool
	var files []string
	for _, o := range opts {
		switch o.Flag {
		case 'a', 'A', 'F', 'l', 'r', 's', 'z':
			if cmd == 0 {
				cmd = o.Flag
			} else if o.Flag != cmd && other == 0 {
				other = o.Flag
			}
		case 'R':
			// -R is "no name resolution" after -f, "remove pool" as a command.
			if cmd == 0 {
				cmd = 'R'
			}
		case 'f':
			if cmd == 0 || cmd == 'R' {
				cmd = 'f'
			}
			files = append(files, o.Arg)
		case 'n':
			noLoad = true
		case 'v':
			verbose = true
		case 'u':
			unload = true
		}
	}
	if cmd != 0 && cmd != 'f' && len(files) > 0 {
		other = 'f'
	}
	if other != 0 {
		// The original runs the first command and only warns about
		// the other letter (its getopt's "invalid option"), so
		// `ippool -F -f new.conf` flushed every table, loaded nothing
		// and exited 0 here, silently. Two commands on one line are a
		// mistake: refuse before anything changes.
		fmt.Fprintf(stderr, "ippool: -%c cannot be used with -%c: one command at a time\n", other, cmd)
		fmt.Fprint(stderr, Usage)
		return 2
	}
	switch cmd {
	case 0:
		fmt.Fprint(stderr, Usage)
		return 2
	case 'f':
		return c.loadFiles(files, noLoad, verbose, unload, stdin, stdout, stderr)
	}
	if err := checkArgs(cmd, opts); err != nil {
		fmt.Fprintf(stderr, "ippool: %v\n", err)
		return 1
	}
	if noLoad {
		// Offline: the arguments are valid and there is no table to
		// add to, remove from, list or flush.
		return 0
	}
	if c.Device == nil {
		fmt.Fprintf(stderr, "ippool: %v\n", ErrNoDevice)
		return 1
	}
	if err := c.tableCommand(cmd, opts, verbose); err != nil {
		fmt.Fprintf(stderr, "ippool: %v\n", err)
		return 1
	}
	return 0
}

// loadFiles checks (and without -n loads, or with -u unloads) the files.
// The kernel tables change only when every file is good, all at once.
func (c *Command) loadFiles(files []string, noLoad, verbose, unload bool, stdin io.Reader, stdout, stderr io.Writer) int {
	var err error
	status := 0
	var load []*ippool.Table
	fileOf := map[*ippool.Table]string{}
	for _, fn := range files {
		src, err := readFile(fn, stdin)
		if err != nil {
			fmt.Fprintf(stderr, "ippool: %v\n", err)
			return 1
		}
		f, perr := ippool.Parse(fn, string(src))
		if verbose && f != nil {
			f.Print(stdout)
		}
		if perr != nil {
			fmt.Fprintln(stderr, perr)
			status = 1
			continue
		}
		load = append(load, f.Tables...)
		for _, t := range f.Tables {
			fileOf[t] = fn
		}
	}
	if noLoad {
		return status
	}
	if status != 0 {
		fmt.Fprintln(stderr, "ippool: errors in the input: no tables changed")
		return status
	}
	// a table defined twice across the files is as bad as a syntax error
	for i, t := range load {
		for _, u := range load[:i] {
			if sameTable(t, u) {
				fmt.Fprintf(stderr, "ippool: %s table %s/%s defined twice: no tables changed\n", t.Type, t.Role, t.Name)
				return 1
			}
		}
	}
	if c.Device == nil {
		fmt.Fprintf(stderr, "ippool: %v\n", ErrNoDevice)
		return 1
	}
	err = c.Device.UpdatePools(func(cur *ippool.File) error {
		if unload {
			return unloadTables(cur, load)
		}
		loadTables(cur, load)
		return nil
	})
	var pe *ipfctl.PoolSpaceError
	if errors.As(err, &pe) && pe.Table != nil && fileOf[pe.Table] != "" {
		// the table that does not fit, where the file defines it
		fmt.Fprintf(stderr, "%s:%d:%d: %v\n", fileOf[pe.Table], pe.Table.Pos.Line, pe.Table.Pos.Col, err)
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "ippool: %v\n", err)
		return 1
	}
	return 0
}

// maxFileSize bounds an ippool.conf: far more than the kernel's pool map
// holds (ipfctl says how much when it is loaded); beyond it a file is a
// mistake and reading it would only exhaust memory.
const maxFileSize = 64 << 20

func readFile(name string, stdin io.Reader) ([]byte, error) {
	return rulefile.Read(name, stdin, maxFileSize)
}

// checkArgs validates the operands of the table commands as the
// original does before it opens the device.
func checkArgs(cmd byte, opts []getopt.Opt) error {
	var name, addr string
	for _, o := range opts {
		switch o.Flag {
		case 'm':
			name = o.Arg
		case 'i':
			addr = o.Arg
		case 'o':
			switch o.Arg {
			case "ipf", "nat", "auth", "count", "all":
			default:
				return fmt.Errorf("unknown role %q", o.Arg)
			}
		case 't':
			switch o.Arg {
			case "tree", "hash", "dstlist", "group-map":
			default:
				return fmt.Errorf("unknown type %q", o.Arg)
			}
		case 'S', 'T':
			if !netfmt.IsNumber(o.Arg) {
				return fmt.Errorf("-%c needs a number, not %q", o.Flag, o.Arg)
			}
		}
	}
	switch cmd {
	case 'a', 'r':
		if addr == "" {
			return errors.New("no IP address given with -i")
		}
		host, bits, hasBits := strings.Cut(addr, "/")
		h, err := netfmt.ParseHost(host, 0)
		if err != nil {
			return err
		}
		if hasBits {
			max := 32
			if h.Fam == 6 {
				max = 128
			}
			if n, err := strconv.Atoi(bits); err != nil || n < 0 || n > max {
				if _, ok := netfmt.ParseDotted(bits); !ok || h.Fam == 6 {
					return fmt.Errorf("bad netmask %q", bits)
				}
			}
		}
		fallthrough
	case 'A', 'R':
		if name == "" {
			return errors.New("no pool name given with -m")
		}
	}
	return nil
}

// sameTable reports whether a and b are the same kernel table: tables are
// known by role and name within a kind (trees, hashes and group-maps,
// dstlists), as in pool.Set.
func sameTable(a, b *ippool.Table) bool {
	kind := func(t ippool.Type) ippool.Type {
		if t == ippool.GroupMap {
			return ippool.Hash
		}
		return t
	}
	return a.Role == b.Role && a.Name == b.Name && kind(a.Type) == kind(b.Type)
}

// loadTables adds the tables of a file to cur. A table that is already
// loaded is replaced by the file's definition, so reloading a changed
// ippool.conf updates the tables instead of failing on each of them.
func loadTables(cur *ippool.File, load []*ippool.Table) {
next:
	for _, t := range load {
		for i, c := range cur.Tables {
			if sameTable(c, t) {
				cur.Tables[i] = t
				continue next
			}
		}
		cur.Tables = append(cur.Tables, t)
	}
}

// unloadTables removes the tables a file defines (ippool -f F -u).
func unloadTables(cur *ippool.File, load []*ippool.Table) error {
	for _, t := range load {
		i := findTable(cur, func(c *ippool.Table) bool { return sameTable(c, t) })
		if i < 0 {
			return fmt.Errorf("remove lookup table %s/%s: no such table", t.Role, t.Name)
		}
		cur.Tables = append(cur.Tables[:i], cur.Tables[i+1:]...)
	}
	return nil
}

func findTable(f *ippool.File, match func(*ippool.Table) bool) int {
	for i, t := range f.Tables {
		if match(t) {
			return i
		}
	}
	return -1
}

// selection is the table selection of -m, -o and -t.
type selection struct {
	name    string
	role    ippool.Role
	anyRole bool
	typ     string // "" = any
	seed    uint32
	addr    string
}

func (s selection) match(t *ippool.Table) bool {
	if s.name != "" && t.Name != s.name {
		return false
	}
	if !s.anyRole && t.Role != s.role {
		return false
	}
	switch s.typ {
	case "":
		return true
	case "hash":
		return t.Type == ippool.Hash || t.Type == ippool.GroupMap
	}
	return t.Type.String() == s.typ
}

var roles = map[string]ippool.Role{"ipf": ippool.RoleIPF, "nat": ippool.RoleNAT, "auth": ippool.RoleAuth, "count": ippool.RoleCount, "all": ippool.RoleAll}

// tableCommand runs -a, -r, -A, -R, -F, -l and -s against the device.
func (c *Command) tableCommand(cmd byte, opts []getopt.Opt, verbose bool) error {
	// the table commands default to role ipf, the listing ones to all
	sel := selection{role: ippool.RoleIPF, anyRole: cmd == 'l' || cmd == 's' || cmd == 'F'}
	for _, o := range opts {
		switch o.Flag {
		case 'm':
			sel.name = o.Arg
		case 'o':
			sel.role, sel.anyRole = roles[o.Arg], false
			if o.Arg == "all" && (cmd == 'l' || cmd == 's' || cmd == 'F') {
				sel.anyRole = true
			}
		case 't':
			sel.typ = o.Arg
		case 'S':
			v, _ := strconv.ParseUint(o.Arg, 10, 32)
			sel.seed = uint32(v)
		case 'i':
			sel.addr = o.Arg
		}
	}
	switch cmd {
	case 'l':
		f, err := c.Device.Pools()
		if err != nil {
			return err
		}
		var b strings.Builder
		for _, t := range f.Tables {
			if sel.match(t) {
				t.Format(&b)
			}
		}
		_, err = io.WriteString(c.Stdout, b.String())
		return err
	case 's':
		f, err := c.Device.Pools()
		if err != nil {
			return err
		}
		return writeStats(c.Stdout, f, sel)
	case 'a', 'r':
		e, err := parseEntry(sel.addr)
		if err != nil {
			return err
		}
		return c.Device.UpdatePools(func(f *ippool.File) error {
			i := findTable(f, func(t *ippool.Table) bool { return sel.match(t) && t.Type != ippool.DstList })
			if i < 0 {
				return fmt.Errorf("%s node: no such table %s/%s", addRemove(cmd), sel.role, sel.name)
			}
			t := f.Tables[i]
			j := -1
			for k, x := range t.Entries {
				if x.Fam == e.Fam && x.Addr == e.Addr && x.Bits == e.Bits {
					j = k
					break
				}
			}
			if cmd == 'a' {
				if j >= 0 {
					return fmt.Errorf("add node: %s already in %s/%s", ippool.FormatEntry(e), t.Role, t.Name)
				}
				if t.Type == ippool.GroupMap {
					e.Group = t.Name
				}
				t.Entries = append(t.Entries, e)
				return nil
			}
			if j < 0 {
				return fmt.Errorf("remove node: %s not in %s/%s", ippool.FormatEntry(e), t.Role, t.Name)
			}
			t.Entries = append(t.Entries[:j], t.Entries[j+1:]...)
			return nil
		})
	case 'A':
		nt := &ippool.Table{Role: sel.role, Name: sel.name, Seed: sel.seed}
		switch sel.typ {
		case "", "tree":
			nt.Type = ippool.Tree
		case "hash":
			// the original's default size for a table made empty
			nt.Type, nt.Size = ippool.Hash, 1
		default:
			return fmt.Errorf("add lookup table: -A makes tree and hash tables, not %s", sel.typ)
		}
		return c.Device.UpdatePools(func(f *ippool.File) error {
			if findTable(f, func(t *ippool.Table) bool { return sameTable(t, nt) }) >= 0 {
				return fmt.Errorf("add lookup table: %s/%s already exists", nt.Role, nt.Name)
			}
			f.Tables = append(f.Tables, nt)
			return nil
		})
	case 'R':
		return c.Device.UpdatePools(func(f *ippool.File) error {
			i := findTable(f, sel.match)
			if i < 0 {
				return fmt.Errorf("remove lookup table: no such table %s/%s", sel.role, sel.name)
			}
			f.Tables = append(f.Tables[:i], f.Tables[i+1:]...)
			return nil
		})
	case 'F':
		n := 0
		err := c.Device.UpdatePools(func(f *ippool.File) error {
			keep := f.Tables[:0]
			for _, t := range f.Tables {
				if sel.match(t) {
					n++
				} else {
					keep = append(keep, t)
				}
			}
			f.Tables = keep
			return nil
		})
		if err == nil && verbose {
			s := "s"
			if n == 1 {
				s = ""
			}
			fmt.Fprintf(c.Stdout, "%d object%s flushed\n", n, s)
		}
		return err
	}
	return fmt.Errorf("-%c: %w", cmd, errors.ErrUnsupported)
}

func addRemove(cmd byte) string {
	if cmd == 'a' {
		return "add"
	}
	return "remove"
}

// parseEntry reads -i ADDR[/MASK] (checked by checkArgs) as a node,
// masked to its prefix.
func parseEntry(s string) (ippool.Entry, error) {
	host, mask, hasMask := strings.Cut(s, "/")
	h, err := netfmt.ParseHost(host, 0)
	if err != nil {
		return ippool.Entry{}, err
	}
	e := ippool.Entry{Fam: h.Fam, Addr: h.A}
	if e.Fam == 0 {
		e.Fam = 4
	}
	max := 32
	if e.Fam == 6 {
		max = 128
	}
	e.Bits = max
	if hasMask {
		if n, err := strconv.Atoi(mask); err == nil && n >= 0 && n <= max {
			e.Bits = n
		} else if m, ok := netfmt.ParseDotted(mask); ok && e.Fam == 4 {
			v := binary.BigEndian.Uint32(m[:])
			if v != 0 && bits.OnesCount32(v)+bits.TrailingZeros32(v) != 32 {
				return ippool.Entry{}, fmt.Errorf("bad netmask %q", mask)
			}
			e.Bits = bits.OnesCount32(v)
		} else {
			return ippool.Entry{}, fmt.Errorf("bad netmask %q", mask)
		}
	}
	var a netip.Addr
	if e.Fam == 6 {
		a = netip.AddrFrom16(e.Addr)
	} else {
		a = netip.AddrFrom4([4]byte(e.Addr[:4]))
	}
	p := netip.PrefixFrom(a, e.Bits).Masked()
	e.Addr = [16]byte{}
	if e.Fam == 6 {
		e.Addr = p.Addr().As16()
	} else {
		v4 := p.Addr().As4()
		copy(e.Addr[:4], v4[:])
	}
	return e, nil
}

// writeStats prints ippool -s as IPFilter 5.x does for the selected role.
func writeStats(w io.Writer, f *ippool.File, sel selection) error {
	var pools, poolNodes, tables, tableNodes, lists, listNodes int
	for _, t := range f.Tables {
		if !sel.anyRole && t.Role != sel.role {
			continue
		}
		switch t.Type {
		case ippool.Tree:
			pools++
			poolNodes += len(t.Entries)
		case ippool.Hash, ippool.GroupMap:
			tables++
			tableNodes += len(t.Entries)
		case ippool.DstList:
			lists++
			listNodes += len(t.Dests)
		}
	}
	var b strings.Builder
	if sel.typ == "" || sel.typ == "tree" {
		fmt.Fprintf(&b, "%d\taddress pools\n%d\taddress pool nodes\n", pools, poolNodes)
	}
	if sel.typ == "" || sel.typ == "hash" || sel.typ == "group-map" {
		fmt.Fprintf(&b, "%d\thash tables\n%d\thash table nodes\n%d\thash table no memory \n", tables, tableNodes, 0)
	}
	if sel.typ == "" || sel.typ == "dstlist" {
		fmt.Fprintf(&b, "%d\tdestination lists\n%d\tdestination list nodes\n%d\tdestination list no memory\n", lists, listNodes, 0)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
