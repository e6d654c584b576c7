package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

func TestPaddedFillsWithSpacesToTheSize(t *testing.T) {
	got := padded("123456", 4096)
	if len(got) != 4096 {
		t.Fatalf("len %d, want 4096", len(got))
	}
	if !bytes.HasPrefix(got, []byte("123456")) || strings.Trim(string(got[6:]), " ") != "" {
		t.Fatalf("want the digits then spaces, got %q...", got[:16])
	}
	// what ktrial's decoder does with a read value: the integer back
	if n, err := strconv.Atoi(strings.TrimSpace(string(got))); err != nil || n != 123456 {
		t.Fatalf("decoded %d, %v", n, err)
	}
	if got := padded("7", 20); string(got) != "7"+strings.Repeat(" ", 19) {
		t.Fatalf("got %q", got)
	}
}

func TestPaddedLeavesLongValuesAndNoSizeAlone(t *testing.T) {
	for _, c := range []struct {
		v string
		n int
	}{{"12345", 0}, {"12345", 5}, {"12345", 3}, {"", 0}, {"42", -1}} {
		if got := padded(c.v, c.n); string(got) != c.v {
			t.Errorf("padded(%q, %d) = %q, want it unchanged", c.v, c.n, got)
		}
	}
}

// The produce path pads: open's value_bytes is echoed and every record built for the
// client carries the padded value (no broker needed: the client connects lazily).
func TestOpenEchoesValueBytesAndProduceRecordsArePadded(t *testing.T) {
	w := &worker{}
	reply := w.handle(&request{Call: "open", Bootstrap: "127.0.0.1:1", Producer: true, ValueBytes: 1024, TimeoutMs: 1000})
	defer w.shutdown(false)
	if reply["ok"] != true || reply["value_bytes"] != 1024 {
		t.Fatalf("open: %v", reply)
	}
	rec := w.record(sendRecord{Op: 1, I: 0, Topic: "t", Partition: 3, Value: "99"})
	if len(rec.Value) != 1024 || string(rec.Value[:3]) != "99 " || rec.Partition != 3 || rec.Topic != "t" {
		t.Fatalf("record %s/%d value %q... (%d bytes)", rec.Topic, rec.Partition, rec.Value[:8], len(rec.Value))
	}
}

func TestOpenWithoutValueBytesSendsValuesAsGivenAndRefusesNegative(t *testing.T) {
	w := &worker{}
	reply := w.handle(&request{Call: "open", Bootstrap: "127.0.0.1:1", Producer: true, TimeoutMs: 1000})
	defer w.shutdown(false)
	if reply["ok"] != true || reply["value_bytes"] != 0 {
		t.Fatalf("open: %v", reply)
	}
	if rec := w.record(sendRecord{Value: "99"}); string(rec.Value) != "99" {
		t.Fatalf("value %q", rec.Value)
	}
	bad := (&worker{}).handle(&request{Call: "open", Bootstrap: "127.0.0.1:1", Producer: true, ValueBytes: -1})
	if e, ok := bad["error"].(errRecord); bad["ok"] != false || !ok || e.Name != "BadSettings" || !e.Fatal {
		t.Fatalf("negative value_bytes: %v", bad)
	}
}
