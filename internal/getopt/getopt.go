// Package getopt is the POSIX getopt(3) shared by Sluice's classic
// commands (ipf, ipftest, ipnat, ippool, ipmon, ipfstat, netperf,
// netserver), so that they all read their command lines the same way the C
// originals do:
//
//   - flags may be clustered: -Rnvf file is -R -n -v -f file;
//   - an option argument is the rest of the word (-fFILE, -Fa) or else the
//     next word (-f FILE), even if that word starts with '-';
//   - "--" ends the options and is dropped; a lone "-" is an operand;
//   - the first operand ends the options (no GNU permutation: none of the
//     commands needs it).
//
// An optstring lists the option letters; a letter followed by ':' takes a
// required argument, one followed by "::" an optional argument. Optional
// arguments follow netperf's convention rather than GNU's attached-only
// one: the rest of the word, or else the next word unless it starts with
// '-'.
//
// Commands that act on each option as they meet it (ipf does) iterate with
// [Parser.Next] or [Parser.All]; the others collect everything with
// [Parse] and check the command line before doing anything.
package getopt

import (
	"fmt"
	"iter"
)

// Opt is one parsed option.
type Opt struct {
	Flag byte   // the option letter
	Arg  string // its argument, "" if none
	// HasArg tells an optional argument given as an empty word (-o "")
	// from one not given at all. It is true for every option that takes
	// a required argument.
	HasArg bool
}

// Kind says what is wrong with a command line.
type Kind uint8

// The two errors getopt(3) reports.
const (
	// IllegalOption is a letter that is not in the optstring.
	IllegalOption Kind = iota + 1
	// MissingArgument is an option that needs an argument at the end of
	// the command line.
	MissingArgument
)

// Error is a command-line error. Its text is that of the C library the
// original command used: BSD/HP-UX wording by default, glibc's when GNU is
// set.
type Error struct {
	Kind Kind
	Flag byte
	GNU  bool
}

func (e *Error) Error() string {
	switch {
	case e.Kind == IllegalOption && e.GNU:
		return fmt.Sprintf("invalid option -- '%c'", e.Flag)
	case e.Kind == IllegalOption:
		return fmt.Sprintf("illegal option -- %c", e.Flag)
	case e.GNU:
		return fmt.Sprintf("option requires an argument -- '%c'", e.Flag)
	default:
		return fmt.Sprintf("option requires an argument -- %c", e.Flag)
	}
}

// argument kinds of an option letter
const (
	unknown uint8 = iota
	flag
	required
	optional
)

// Parser walks a command line one option at a time.
type Parser struct {
	// GNU selects glibc's wording for errors (netperf and ipftest are
	// Linux programs in their original form).
	GNU bool

	args     []string
	kinds    [256]uint8
	optind   int
	sub      int // offset of the next letter in args[optind]; 0 = at a new word
	dashDash bool
}

// New returns a parser for args (without the program name).
func New(args []string, optstring string) *Parser {
	p := &Parser{args: args}
	for i := 0; i < len(optstring); i++ {
		c := optstring[i]
		if c == ':' {
			continue
		}
		k := flag
		if i+1 < len(optstring) && optstring[i+1] == ':' {
			k = required
			if i+2 < len(optstring) && optstring[i+2] == ':' {
				k = optional
			}
		}
		if p.kinds[c] == unknown { // the first mention wins, as with strchr(3)
			p.kinds[c] = k
		}
	}
	return p
}

// Next returns the next option. ok is false when the options are over
// (see [Parser.Operands]) or err is set. After an error, Next goes on with
// the following letter, as getopt(3) does.
func (p *Parser) Next() (o Opt, ok bool, err error) {
	if p.sub == 0 {
		if p.optind >= len(p.args) {
			return Opt{}, false, nil
		}
		a := p.args[p.optind]
		if a == "--" {
			p.optind++
			p.dashDash = true
			return Opt{}, false, nil
		}
		if len(a) < 2 || a[0] != '-' {
			return Opt{}, false, nil
		}
		p.sub = 1
	}
	a := p.args[p.optind]
	c := a[p.sub]
	p.sub++
	rest := a[p.sub:]
	switch p.kinds[c] {
	case flag:
		p.endWordIfDone()
		return Opt{Flag: c}, true, nil
	case required, optional:
		p.nextWord()
		if rest != "" {
			return Opt{Flag: c, Arg: rest, HasArg: true}, true, nil
		}
		if p.optind < len(p.args) {
			next := p.args[p.optind]
			if p.kinds[c] == required || next == "" || next[0] != '-' {
				p.optind++
				return Opt{Flag: c, Arg: next, HasArg: true}, true, nil
			}
		}
		if p.kinds[c] == optional {
			return Opt{Flag: c}, true, nil
		}
		return Opt{}, false, &Error{Kind: MissingArgument, Flag: c, GNU: p.GNU}
	default:
		p.endWordIfDone()
		return Opt{}, false, &Error{Kind: IllegalOption, Flag: c, GNU: p.GNU}
	}
}

func (p *Parser) nextWord() {
	p.optind++
	p.sub = 0
}

func (p *Parser) endWordIfDone() {
	if p.sub >= len(p.args[p.optind]) {
		p.nextWord()
	}
}

// All iterates over the options until the first operand, "--" or error.
// An error is yielded once, and ends the iteration.
func (p *Parser) All() iter.Seq2[Opt, error] {
	return func(yield func(Opt, error) bool) {
		for {
			o, ok, err := p.Next()
			if err != nil {
				yield(Opt{}, err)
				return
			}
			if !ok || !yield(o, nil) {
				return
			}
		}
	}
}

// Optind is the index in args of the next word to be parsed: once the
// options are over, the first operand.
func (p *Parser) Optind() int { return p.optind }

// Operands returns the words after the options.
func (p *Parser) Operands() []string { return p.args[p.optind:] }

// DashDash reports whether the options ended with a "--" word.
func (p *Parser) DashDash() bool { return p.dashDash }

// Parse parses all the options of args (without the program name) and
// returns them in order with the operands. On error it returns the
// options before the bad one and no operands.
func Parse(args []string, optstring string) ([]Opt, []string, error) {
	return New(args, optstring).Collect()
}

// Collect parses the remaining options as [Parse] does.
func (p *Parser) Collect() ([]Opt, []string, error) {
	var opts []Opt
	for o, err := range p.All() {
		if err != nil {
			return opts, nil, err
		}
		opts = append(opts, o)
	}
	return opts, p.Operands(), nil
}
