// Package conformance runs the IPFilter regression suite (the
// ipf-conformance kit, see its README) against Sluice's commands, the way
// the kit's own "run" script does, from "go test".
package conformance

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// EnvData names the environment variable that overrides the kit location.
const EnvData = "IPF_CONFORMANCE_DATA"

// ErrNoKit is returned by KitDir when the kit cannot be found.
var ErrNoKit = errors.New("ipf-conformance kit not found")

// KitDir returns the kit folder (the one holding manifest.tsv): $IPF_CONFORMANCE_DATA,
// else ../shared/ipf-conformance relative to the module root found by
// walking up from the working directory.
func KitDir() (string, error) {
	if d := os.Getenv(EnvData); d != "" {
		if _, err := os.Stat(filepath.Join(d, "manifest.tsv")); err != nil {
			return "", fmt.Errorf("%w: %s=%s: %v", ErrNoKit, EnvData, d, err)
		}
		return filepath.Abs(d)
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	d := filepath.Join(root, "..", "shared", "ipf-conformance")
	if _, err := os.Stat(filepath.Join(d, "manifest.tsv")); err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoKit, err)
	}
	return filepath.Clean(d), nil
}

// ModuleRoot returns the directory holding go.mod above the working directory.
func ModuleRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		p := filepath.Dir(d)
		if p == d {
			return "", errors.New("go.mod not found above the working directory")
		}
		d = p
	}
}

// Test is one row of manifest.tsv.
type Test struct {
	Name, Family, Driver, Mode, InputFormat, OutputFormat string
	// Options are the words of the options column (nil for "-").
	Options []string
	Cases   string
	Default string
	// Features and Files are informational.
	Features, Files string
}

// LoadManifest reads manifest.tsv of the kit at dir.
func LoadManifest(dir string) ([]Test, error) {
	f, err := os.Open(filepath.Join(dir, "manifest.tsv"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	var cols []string
	var tests []Test
	for s.Scan() {
		line := s.Text()
		if cols == nil {
			cols = strings.Split(line, "\t")
			continue
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		v := strings.Split(line, "\t")
		m := map[string]string{}
		for k, c := range cols {
			if k < len(v) {
				m[c] = v[k]
			}
		}
		t := Test{Name: m["test"], Family: m["family"], Driver: m["driver"], Mode: m["mode"],
			InputFormat: m["input_format"], OutputFormat: m["output_format"], Cases: m["cases"],
			Default: m["default"], Features: m["features"], Files: m["files"]}
		if o := m["options"]; o != "-" && o != "" {
			t.Options = strings.Fields(o)
		}
		if t.Name == "" || t.Driver == "" {
			return nil, fmt.Errorf("manifest.tsv: malformed row %q", line)
		}
		tests = append(tests, t)
	}
	return tests, s.Err()
}

// ShReadLines emulates `while read rule; do ...; done < file` (POSIX sh,
// no -r, default IFS): backslash-newline joins lines, backslash-char
// yields the char, leading and trailing blanks are stripped, and a final
// line without a newline is not processed.
func ShReadLines(data []byte) []string {
	var out []string
	i, n := 0, len(data)
	for i < n {
		var buf []byte
		var prot []bool
		terminated := false
		for i < n {
			c := data[i]
			if c == '\\' && i+1 < n {
				if data[i+1] == '\n' {
					i += 2
					continue
				}
				buf = append(buf, data[i+1])
				prot = append(prot, true)
				i += 2
				continue
			}
			if c == '\\' {
				i++
				continue
			}
			i++
			if c == '\n' {
				terminated = true
				break
			}
			buf = append(buf, c)
			prot = append(prot, false)
		}
		if !terminated {
			break
		}
		s, e := 0, len(buf)
		for s < e && (buf[s] == ' ' || buf[s] == '\t') && !prot[s] {
			s++
		}
		for e > s && (buf[e-1] == ' ' || buf[e-1] == '\t') && !prot[e-1] {
			e--
		}
		out = append(out, string(buf[s:e]))
	}
	return out
}
