package bpf

import (
	"reflect"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// TestLayout checks that the Go mirrors have the size and field offsets of
// the C structs, as the compiled object's BTF describes them.
func TestLayout(t *testing.T) {
	spec, err := loadFilter()
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]any{
		"rule":        rawRule{},
		"list":        rawList{},
		"counter":     rawCounter{},
		"lpm_key":     rawLPMKey{},
		"port_key":    rawPortKey{},
		"blocks":      rawBlocks{},
		"state_key":   rawStateKey{},
		"tcp_side":    rawTCPSide{},
		"state_entry": rawStateEntry{},
		"log_rec":     rawLogRec{},
		"rule_text":   rawRuleText{},
		"list_meta":   rawListMeta{},
		"dca_key":     filterDcaKey{},
		"frag_key":    rawFragKey{},
		"frag_entry":  rawFragEntry{},
		"expr_val":    rawExpr{},
	} {
		var s *btf.Struct
		if err := spec.Types.TypeByName(name, &s); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		gt := reflect.TypeOf(v)
		if int(s.Size) != int(gt.Size()) {
			t.Errorf("%s: C size %d, Go size %d", name, s.Size, gt.Size())
		}
		var fields []reflect.StructField
		for i := 0; i < gt.NumField(); i++ {
			if f := gt.Field(i); f.Name != "_" {
				fields = append(fields, f)
			}
		}
		if len(fields) != len(s.Members) {
			t.Errorf("%s: C has %d members, Go %d", name, len(s.Members), len(fields))
			continue
		}
		for i, m := range s.Members {
			if off := int(m.Offset.Bytes()); off != int(fields[i].Offset) {
				t.Errorf("%s.%s: C offset %d, Go %s offset %d", name, m.Name, off, fields[i].Name, fields[i].Offset)
			}
		}
	}
}
