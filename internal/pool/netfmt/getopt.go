package netfmt

import "fmt"

// Opt is one parsed command-line option.
type Opt struct {
	Flag byte
	Arg  string
}

// Getopt parses args (without the program name) against a POSIX getopt
// spec such as "f:nRv". Parsing stops at the first non-option or "--".
// It returns the options in order and the remaining operands.
func Getopt(args []string, spec string) ([]Opt, []string, error) {
	var opts []Opt
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			i++
			break
		}
		if len(a) < 2 || a[0] != '-' {
			break
		}
		for j := 1; j < len(a); j++ {
			c := a[j]
			k := indexByte(spec, c)
			if k < 0 || c == ':' {
				return opts, nil, fmt.Errorf("illegal option -- %c", c)
			}
			if k+1 < len(spec) && spec[k+1] == ':' {
				var arg string
				if j+1 < len(a) {
					arg = a[j+1:]
				} else if i+1 < len(args) {
					i++
					arg = args[i]
				} else {
					return opts, nil, fmt.Errorf("option requires an argument -- %c", c)
				}
				opts = append(opts, Opt{c, arg})
				break
			}
			opts = append(opts, Opt{c, ""})
		}
	}
	return opts, args[i:], nil
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}
