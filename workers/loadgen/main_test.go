package main

import (
	"strings"
	"testing"
)

func TestFlagsDefaultsAreTheBenchmarks(t *testing.T) {
	c, err := parseFlags([]string{"-brokers", "b:9092"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Size != 256 || c.Acks != "all" || !c.Idempotent || c.Compression != "lz4" || c.LingerMs != 5 {
		t.Fatalf("defaults %+v", c)
	}
	if c.Group != "ktrial-load-ktrial-load" || c.Batch != 50000 {
		t.Fatalf("group %q batch %d", c.Group, c.Batch)
	}
}

func TestFlagsRefuseBadSettings(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "-brokers is required"},
		{[]string{"-brokers", "b", "-size", "8"}, "at least 16"},
		{[]string{"-brokers", "b", "-acks", "1"}, "idempotence needs"},
		{[]string{"-brokers", "b", "-producers", "0", "-consumers", "0"}, "at least one"},
		{[]string{"-brokers", "b", "extra"}, "unexpected arguments"},
	} {
		_, err := parseFlags(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%v: got %v, want %q", tc.args, err, tc.want)
		}
	}
}
