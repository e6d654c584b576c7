package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A control command is one line: a verb and key=value arguments, e.g.
//
//	FAULT id=ab-1-control api=produce error=REQUEST_TIMED_OUT count=-1 nodes=0,2
//
// Every command is answered with one line, "OK ..." or "ERR why".
type command struct {
	verb string
	args map[string]string
}

var verbs = map[string][]string{ // verb -> the arguments it takes
	"PING":    nil,
	"FAULT":   {"id", "api", "error", "count", "nodes", "topic"},
	"CLEAR":   {"id", "prefix"},
	"FAULTS":  nil,
	"SHUFFLE": nil,
	"MOVE":    {"topic", "partition", "node"},
	"REHASH":  nil,
	"LEADER":  {"topic", "partition"},
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

func parseCommand(line string) (command, error) {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return command{}, fmt.Errorf("empty command")
	}
	cmd := command{verb: strings.ToUpper(fields[0]), args: map[string]string{}}
	allowed, ok := verbs[cmd.verb]
	if !ok {
		return command{}, fmt.Errorf("unknown command %q", fields[0])
	}
	for _, f := range fields[1:] {
		k, v, found := strings.Cut(f, "=")
		if !found || k == "" {
			return command{}, fmt.Errorf("%s: argument %q is not key=value", cmd.verb, f)
		}
		known := false
		for _, a := range allowed {
			known = known || a == k
		}
		if !known {
			return command{}, fmt.Errorf("%s takes no argument %q", cmd.verb, k)
		}
		if _, dup := cmd.args[k]; dup {
			return command{}, fmt.Errorf("%s: argument %q given twice", cmd.verb, k)
		}
		cmd.args[k] = v
	}
	return cmd, nil
}

func normalise(name string) string {
	return strings.NewReplacer("_", "", "-", "", " ", "").Replace(strings.ToLower(name))
}

// apiKey reads a request key by number or by name (produce, end_txn, EndTxn).
func apiKey(name string) (int16, error) {
	if n, err := strconv.Atoi(name); err == nil {
		if n < 0 || n > 1000 || kmsg.NameForKey(int16(n)) == "Unknown" {
			return 0, fmt.Errorf("unknown API key %d", n)
		}
		return int16(n), nil
	}
	want := normalise(name)
	for k := int16(0); k < 1000; k++ {
		if n := kmsg.NameForKey(k); n != "Unknown" && normalise(n) == want {
			return k, nil
		}
	}
	return 0, fmt.Errorf("unknown API %q", name)
}

// aliases are the names Kafka gives today to codes kerr knows by an older name.
var aliases = map[string]int16{
	"NOT_LEADER_OR_FOLLOWER": 6, // NOT_LEADER_FOR_PARTITION before Kafka 2.6
}

// kafkaError reads an error by its Kafka name (REQUEST_TIMED_OUT) or code (7).
// The pointer is kerr's own, which kfake compares by identity.
func kafkaError(name string) (*kerr.Error, error) {
	if n, err := strconv.Atoi(name); err == nil {
		if n == 0 || n < -1 || n > 32767 {
			return nil, fmt.Errorf("error code %d is not an error", n)
		}
		e := kerr.TypedErrorForCode(int16(n))
		if int(e.Code) != n {
			return nil, fmt.Errorf("unknown error code %d", n)
		}
		return e, nil
	}
	if code, ok := aliases[strings.ToUpper(name)]; ok {
		return kerr.TypedErrorForCode(code), nil
	}
	for code := int16(-1); code < 1000; code++ {
		if code == 0 {
			continue
		}
		e := kerr.TypedErrorForCode(code)
		if e != nil && e.Code == code && strings.EqualFold(e.Message, name) {
			return e, nil
		}
	}
	return nil, fmt.Errorf("unknown Kafka error %q", name)
}

func intArg(args map[string]string, key string, def int, required bool) (int, error) {
	raw, ok := args[key]
	if !ok {
		if required {
			return 0, fmt.Errorf("missing %s=", key)
		}
		return def, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil {
		return 0, fmt.Errorf("%s=%q is not an integer", key, raw)
	}
	return n, nil
}

func nodeList(raw string) ([]int32, error) {
	if raw == "" {
		return nil, nil
	}
	var out []int32
	for _, p := range strings.Split(raw, ",") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("nodes=%q: expected node ids like 0,2", raw)
		}
		out = append(out, int32(n))
	}
	return out, nil
}

// faultSpec is a FAULT command read and checked.
type faultSpec struct {
	id    string
	key   int16
	err   *kerr.Error
	count int
	nodes []int32
	topic string
}

func parseFault(c command) (faultSpec, error) {
	var s faultSpec
	s.id = c.args["id"]
	if !idPattern.MatchString(s.id) {
		return s, fmt.Errorf("FAULT: id=%q must be 1-128 of A-Z a-z 0-9 . _ -", s.id)
	}
	var err error
	if s.key, err = apiKey(c.args["api"]); err != nil {
		return s, fmt.Errorf("FAULT: api: %w", err)
	}
	if s.err, err = kafkaError(c.args["error"]); err != nil {
		return s, fmt.Errorf("FAULT: error: %w", err)
	}
	if s.count, err = intArg(c.args, "count", -1, false); err != nil {
		return s, fmt.Errorf("FAULT: %w", err)
	}
	if s.count == 0 || s.count < -1 {
		return s, fmt.Errorf("FAULT: count=%d: a positive number of requests, or -1 until cleared", s.count)
	}
	if s.nodes, err = nodeList(c.args["nodes"]); err != nil {
		return s, fmt.Errorf("FAULT: %w", err)
	}
	s.topic = c.args["topic"]
	return s, nil
}
