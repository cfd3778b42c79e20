package ipfctl

import "sluice/internal/rules/ipnat"

// NATChange is what one ipnat command line changes, in IPFilter's order:
// the sessions flushed (-F), the rules cleared (-C), then the rules of
// each file added or, with Remove, deleted (-f, -r), the sessions of
// deleted rules purged with Purge or a rule's purge option (-p). The
// device applies it as one transaction.
type NATChange struct {
	Flush, Clear  bool
	Files         []NATFile
	Remove, Purge bool
}

// NATFile is the rules of one -f file; Name is used in errors.
type NATFile struct {
	Name  string
	Rules []*ipnat.Rule
}

// empty reports whether the change changes nothing.
func (c NATChange) empty() bool {
	if c.Flush || c.Clear {
		return false
	}
	for _, f := range c.Files {
		if len(f.Rules) > 0 {
			return false
		}
	}
	return true
}
