package result

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRoundTrip(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	run := &Run{Version: Version, Start: time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC), Kernel: "6.18", Runner: "fake", Reps: 2,
		Duration: time.Second, Tests: []Test{{ID: "TCP_RR 1/1", Name: "TCP_RR", Suite: "ipf", ReqSize: 1, RespSize: 1}}}
	rep := &Rep{Config: "none", Test: "TCP_RR 1/1", Rep: 1, TransPerSec: 12345.5, LocalCPU: -1, Time: run.Start}
	for _, r := range []Record{
		{Kind: KindRun, Run: run}, {Kind: KindRep, Rep: rep},
		{Kind: KindSkip, Skip: &Skip{Config: "sluice-stateless", Reason: "datapath not available"}},
		{Kind: KindEnd, End: &EndInfo{Time: run.Start, Interrupted: true}},
	} {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(b.String(), "\n"); n != 4 {
		t.Fatalf("%d lines, want 4", n)
	}
	s, err := Read(&b)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(*run, s.Run); d != "" {
		t.Errorf("run (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]Rep{*rep}, s.Reps); d != "" {
		t.Errorf("reps (-want +got):\n%s", d)
	}
	if len(s.Skips) != 1 || s.End == nil || !s.End.Interrupted {
		t.Errorf("skips %v end %v", s.Skips, s.End)
	}
	if s.Run.Tests[0].Stream() {
		t.Error("TCP_RR counted as a stream test")
	}
}

func TestReadErrors(t *testing.T) {
	run := `{"kind":"run","run":{"version":1}}` + "\n"
	rep := `{"kind":"rep","rep":{"config":"none","test":"x","rep":1}}` + "\n"
	for _, tc := range []struct {
		name, in, err string
	}{
		{"empty", "", "no run record"},
		{"bad middle line", run + "{oops\n" + rep, "results:2:"},
		{"rep first", rep + run, "results:1: repetition before the run record"},
		{"version", `{"kind":"run","run":{"version":9}}` + "\n", "format version 9"},
		{"version 0", `{"kind":"run","run":{"version":0}}` + "\n", "format version 0"},
		{"kind", run + `{"kind":"what"}` + "\n", `unknown record kind "what"`},
		{"two runs", run + run, "results:2: unexpected run record"},
	} {
		_, err := Read(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.err)
		}
	}
	// A line cut by a crash at the end is dropped, not an error.
	s, err := Read(strings.NewReader(run + rep + `{"kind":"rep","rep":{"con`))
	if err != nil || len(s.Reps) != 1 || s.End != nil {
		t.Errorf("truncated tail: %v, %+v", err, s)
	}
}

func TestDirection(t *testing.T) {
	for _, tc := range []struct {
		name, client, dir, server string
	}{
		{"TCP_STREAM", Peer, Inbound, SUT},
		{"TCP_STREAM", SUT, Outbound, Peer},
		{"TCP_STREAM", "", Outbound, Peer}, // version 1: client on the SUT
		{"TCP_MAERTS", Peer, Outbound, SUT},
		{"TCP_MAERTS", SUT, Inbound, Peer},
		{"TCP_RR", Peer, Inbound, SUT},
		{"TCP_CRR", SUT, Outbound, Peer},
	} {
		tt := Test{Name: tc.name, Client: tc.client}
		if got := tt.Direction(); got != tc.dir {
			t.Errorf("%s, client %q: direction %s, want %s", tc.name, tc.client, got, tc.dir)
		}
		if got := tt.ServerHost(); got != tc.server {
			t.Errorf("%s, client %q: server on %s, want %s", tc.name, tc.client, got, tc.server)
		}
	}
}

// FuzzRead: any input gives a Set or an error, never a panic, and a Set
// always has its run record.
func FuzzRead(f *testing.F) {
	f.Add(`{"kind":"run","run":{"version":1}}` + "\n" + `{"kind":"rep","rep":{"config":"none","test":"x","rep":1,"throughput_mbps":5}}` + "\n")
	f.Add(`{"kind":"skip","skip":{"config":"a","reason":"b"}}`)
	f.Add("{\n}\n")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := Read(strings.NewReader(in))
		if err == nil && (s.Run.Version < 1 || s.Run.Version > Version) {
			t.Fatalf("accepted a stream without a valid run record: %+v", s.Run)
		}
	})
}
