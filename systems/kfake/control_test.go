package main

import "testing"

func TestParseFault(t *testing.T) {
	c, err := parseCommand("FAULT id=a-1 api=produce error=REQUEST_TIMED_OUT count=3 nodes=0,2 topic=t")
	if err != nil {
		t.Fatal(err)
	}
	s, err := parseFault(c)
	if err != nil {
		t.Fatal(err)
	}
	if s.key != 0 || s.err.Code != 7 || s.count != 3 || len(s.nodes) != 2 || s.topic != "t" {
		t.Fatalf("parsed %+v", s)
	}
	if e, err := kafkaError("NOT_LEADER_OR_FOLLOWER"); err != nil || e.Code != 6 {
		t.Fatalf("NOT_LEADER_OR_FOLLOWER = %v, %v", e, err)
	}
	for _, api := range []string{"end_txn", "EndTxn", "26"} {
		if k, err := apiKey(api); err != nil || k != 26 {
			t.Fatalf("apiKey(%q) = %d, %v", api, k, err)
		}
	}
}

func TestParseRefusals(t *testing.T) {
	for _, line := range []string{
		"", "BOGUS", "PING x=1", "FAULT id", "CLEAR id=a id=b",
	} {
		if _, err := parseCommand(line); err == nil {
			t.Errorf("%q: accepted", line)
		}
	}
	for _, line := range []string{
		"FAULT id=a api=nope error=REQUEST_TIMED_OUT",
		"FAULT id=a api=produce error=NOPE",
		"FAULT id=a api=produce error=0",
		"FAULT id=a api=produce error=REQUEST_TIMED_OUT count=0",
		"FAULT id=a/b api=produce error=REQUEST_TIMED_OUT",
		"FAULT id=a api=produce error=REQUEST_TIMED_OUT nodes=x",
	} {
		c, err := parseCommand(line)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if _, err := parseFault(c); err == nil {
			t.Errorf("%q: accepted", line)
		}
	}
}
