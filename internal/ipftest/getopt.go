package ipftest

import "fmt"

// opt is one parsed command-line option.
type opt struct {
	c   byte
	arg string
}

// getopt parses args (without the program name) like POSIX getopt(3) with
// the given optstring: grouped flags, an option's argument attached or in
// the next word, parsing stops at "--" or the first non-option. It returns
// the options in order and the remaining operands.
func getopt(args []string, optstring string) ([]opt, []string, error) {
	takes := map[byte]bool{}
	known := map[byte]bool{}
	for i := 0; i < len(optstring); i++ {
		c := optstring[i]
		if c == ':' {
			continue
		}
		known[c] = true
		if i+1 < len(optstring) && optstring[i+1] == ':' {
			takes[c] = true
		}
	}
	var opts []opt
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
			if !known[c] {
				return nil, nil, fmt.Errorf("invalid option -- '%c'", c)
			}
			if !takes[c] {
				opts = append(opts, opt{c: c})
				continue
			}
			if j+1 < len(a) {
				opts = append(opts, opt{c: c, arg: a[j+1:]})
			} else if i+1 < len(args) {
				i++
				opts = append(opts, opt{c: c, arg: args[i]})
			} else {
				return nil, nil, fmt.Errorf("option requires an argument -- '%c'", c)
			}
			break
		}
	}
	return opts, args[i:], nil
}
