package main

import (
	"runtime"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// client builds a client (no connection is made) from an open request's settings.
func client(t *testing.T, settings map[string]any) (*kgo.Client, error) {
	t.Helper()
	opts, err := options(&worker{}, &request{Bootstrap: "127.0.0.1:9", Settings: settings})
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl, nil
}

func maxVersion(t *testing.T, cl *kgo.Client, key kmsg.Key) (int16, bool) {
	t.Helper()
	vs, _ := cl.OptValue(kgo.MaxVersions).(*kversion.Versions)
	if vs == nil {
		return 0, false
	}
	return vs.LookupMaxKeyVersion(int16(key))
}

// transaction.version 1 caps the three requests whose newer versions franz-go needs
// for transactions v2 (KIP-890) at their version-1 forms; 2 leaves the client alone.
func TestTransactionVersion(t *testing.T) {
	cl, err := client(t, map[string]any{"transaction.version": float64(1)})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[kmsg.Key]int16{kmsg.Produce: 11, kmsg.EndTxn: 4, kmsg.TxnOffsetCommit: 4} {
		if v, ok := maxVersion(t, cl, key); !ok || v != want {
			t.Errorf("transaction.version 1: max version of %v = %d (%v), want %d", key, v, ok, want)
		}
	}
	if v, ok := maxVersion(t, cl, kmsg.Fetch); !ok || v < 12 {
		t.Errorf("transaction.version 1 must not cap other requests: Fetch max %d (%v)", v, ok)
	}
	cl2, err := client(t, map[string]any{"transaction.version": float64(2)})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := maxVersion(t, cl2, kmsg.Produce); ok && v < 12 {
		t.Errorf("transaction.version 2: Produce capped at %d", v)
	}
	for _, bad := range []any{float64(3), "v1", true} {
		if _, err := client(t, map[string]any{"transaction.version": bad}); err == nil ||
			!strings.Contains(err.Error(), "transaction.version") {
			t.Errorf("transaction.version %v: want a refusal naming the setting, got %v", bad, err)
		}
	}
}

// gomaxprocs sets the worker's Go scheduler threads (0 keeps Go's default); anything
// but a whole number >= 0 is refused.
func TestGomaxprocs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	runtime.GOMAXPROCS(2)
	if _, err := client(t, map[string]any{"gomaxprocs": float64(0)}); err != nil {
		t.Fatal(err)
	}
	if n := runtime.GOMAXPROCS(0); n != 2 {
		t.Errorf("gomaxprocs 0 changed GOMAXPROCS to %d", n)
	}
	if _, err := client(t, map[string]any{"gomaxprocs": float64(1)}); err != nil {
		t.Fatal(err)
	}
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("gomaxprocs 1: GOMAXPROCS is %d", n)
	}
	for _, bad := range []any{float64(-1), float64(1.5), "x"} {
		if _, err := client(t, map[string]any{"gomaxprocs": bad}); err == nil ||
			!strings.Contains(err.Error(), "gomaxprocs") {
			t.Errorf("gomaxprocs %v: want a refusal naming the setting, got %v", bad, err)
		}
	}
}
