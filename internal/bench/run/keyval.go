package run

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseKeyval reads netperf's -k output (KEY=VALUE lines).
func ParseKeyval(b []byte) (Measurement, error) {
	kv := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if ok {
			kv[k] = v
		}
	}
	num := func(k string) (float64, error) {
		v, ok := kv[k]
		if !ok {
			return 0, fmt.Errorf("netperf: no %s in the output %q", k, b)
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("netperf: %s=%q: %w", k, v, err)
		}
		return f, nil
	}
	var m Measurement
	var errs []error
	get := func(k string, dst *float64) {
		v, err := num(k)
		errs = append(errs, err)
		*dst = v
	}
	var tput, el float64
	get("THROUGHPUT", &tput)
	get("LOCAL_CPU_UTIL", &m.LocalCPU)
	get("REMOTE_CPU_UTIL", &m.RemoteCPU)
	get("LOCAL_SD", &m.LocalSD)
	get("REMOTE_SD", &m.RemoteSD)
	get("ELAPSED_TIME", &el)
	if err := errors.Join(errs...); err != nil {
		return Measurement{}, err
	}
	switch u := kv["THROUGHPUT_UNITS"]; u {
	case "10^6bits/s":
		m.ThroughputMbps = tput
	case "Trans/s":
		m.TransPerSec = tput
	default:
		return Measurement{}, fmt.Errorf("netperf: throughput in %q, want 10^6bits/s or Trans/s (run without -f)", u)
	}
	m.Elapsed = time.Duration(el * float64(time.Second))
	return m, nil
}
