package ippool

import (
	"io"
	"strconv"
	"strings"

	"sluice/internal/rules/netfmt"
)

// Print writes every table in ippool's normalised form (ippool -nv).
func (f *File) Print(w io.Writer) error {
	var b strings.Builder
	for _, t := range f.Tables {
		t.Format(&b)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// String returns the normalised text of the file.
func (f *File) String() string {
	var b strings.Builder
	f.Print(&b)
	return b.String()
}

// nameField is a table's number=N or name=S; an anonymous one prints
// `number=` as a tree and `name=` as a hash table or group-map, as
// IPFilter's printers do.
func nameField(name string, tree bool) string {
	if name == "" {
		if !tree {
			return "name="
		}
		return "number="
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return "name=" + name
		}
	}
	return "number=" + name
}

// FormatEntry prints an address and prefix length as printpool does
// (IPv4 values below 256 as bare numbers).
func FormatEntry(e Entry) string {
	if e.Fam == 6 {
		return netfmt.NtopV6(e.Addr) + "/" + strconv.Itoa(e.Bits)
	}
	return netfmt.PrintIP([4]byte{e.Addr[0], e.Addr[1], e.Addr[2], e.Addr[3]}) + "/" + strconv.Itoa(e.Bits)
}

// PolicyName returns the keyword printed for a dstlist policy.
func (p Policy) String() string {
	switch p {
	case PolicyRoundRobin:
		return "round-robin"
	case PolicyRandom:
		return "random"
	case PolicyWeighted:
		return "weighting connection"
	}
	return ""
}

// Format appends the table's two-line normalised text to b.
func (t *Table) Format(b *strings.Builder) {
	switch t.Type {
	case Tree:
		b.WriteString("table role=" + t.Role.String() + " type=tree " + nameField(t.Name, true) + "\n\t{")
	case Hash:
		b.WriteString("table role=" + t.Role.String() + " type=hash " + nameField(t.Name, false) + " size=" + strconv.Itoa(t.Size))
		if t.Seed != 0 {
			b.WriteString(" seed=" + strconv.FormatUint(uint64(t.Seed), 10))
		}
		b.WriteString("\n\t{")
	case GroupMap:
		dir := "in"
		if t.Out {
			dir = "out"
		}
		b.WriteString("group-map " + dir + " role=" + t.Role.String() + " " + nameField(t.Name, false) + " size=" + strconv.Itoa(t.Size))
		if t.Seed != 0 {
			b.WriteString(" seed=" + strconv.FormatUint(uint64(t.Seed), 10))
		}
		b.WriteString("\n\t{")
	case DstList:
		b.WriteString("pool " + t.Role.String() + "/dstlist (name " + t.Name + ";")
		if t.Policy != PolicyNone {
			b.WriteString(" policy " + t.Policy.String() + ";")
		}
		b.WriteString(")\n\t{")
		for _, d := range t.Dests {
			b.WriteByte(' ')
			if d.Iface != "" {
				b.WriteString(d.Iface + ":")
			}
			if d.Addr.Is4() {
				b.WriteString(netfmt.NtopV4(d.Addr.As4()))
			} else {
				b.WriteString(netfmt.NtopV6(d.Addr.As16()))
			}
			b.WriteByte(';')
		}
		if len(t.Dests) == 0 {
			b.WriteByte(';')
		}
		b.WriteString(" };\n")
		return
	}
	for _, e := range t.Entries {
		b.WriteByte(' ')
		if e.Not {
			b.WriteString("! ")
		}
		b.WriteString(FormatEntry(e))
		if t.Type == GroupMap {
			b.WriteString(", group=" + e.Group)
		}
		b.WriteByte(';')
	}
	if len(t.Entries) == 0 {
		b.WriteByte(';')
	}
	b.WriteString(" };\n")
}
