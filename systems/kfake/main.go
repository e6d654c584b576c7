// Command ktrial-kfake serves franz-go's kfake, an in-memory Kafka cluster in one
// process, as a system under test for ktrial: one listener per broker on the
// given ports, and a line-based control channel on loopback through which the
// nemesis injects errors (kfake's Fault API), moves partition leaders and
// rehashes coordinators. See control.go for the commands.
//
// Once the brokers and the control channel listen it prints one line:
//
//	KFAKE-READY brokers=127.0.0.1:P1,127.0.0.1:P2 control=127.0.0.1:C nodes=0,1
//
// SIGTERM or SIGINT close the cluster (flushing a data directory) and exit 0.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type configFlag map[string]string

func (f configFlag) String() string { return "" }

func (f configFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("expected key=value, got %q", s)
	}
	f[k] = v
	return nil
}

func main() {
	var (
		ports      = flag.String("ports", "", "comma-separated broker ports (one broker each)")
		control    = flag.String("control", "127.0.0.1:0", "loopback address of the control channel")
		dataDir    = flag.String("data-dir", "", "persistence directory (state survives a restart)")
		syncWrites = flag.Bool("sync", false, "fsync every write")
		clusterID  = flag.String("cluster-id", "", "the cluster id")
		logLevel   = flag.String("log-level", "warn", "none, error, warn, info, debug")
	)
	bcfg := configFlag{}
	flag.Var(bcfg, "c", "broker config key=value (repeatable)")
	flag.Parse()
	if err := run(*ports, *control, *dataDir, *syncWrites, *clusterID, *logLevel, bcfg); err != nil {
		fmt.Fprintf(os.Stderr, "ktrial-kfake: %v\n", err)
		os.Exit(2)
	}
}

func level(name string) (kfake.LogLevel, error) {
	switch strings.ToLower(name) {
	case "none":
		return kfake.LogLevelNone, nil
	case "error":
		return kfake.LogLevelError, nil
	case "warn":
		return kfake.LogLevelWarn, nil
	case "info":
		return kfake.LogLevelInfo, nil
	case "debug":
		return kfake.LogLevelDebug, nil
	}
	return 0, fmt.Errorf("-log-level %q: choose none, error, warn, info or debug", name)
}

func run(ports, controlAddr, dataDir string, syncWrites bool, clusterID, logLevel string, bcfg configFlag) error {
	var ps []int
	for _, p := range strings.Split(ports, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n <= 0 || n > 65535 {
			return fmt.Errorf("-ports %q: expected ports like 9092,9093,9094", ports)
		}
		ps = append(ps, n)
	}
	lvl, err := level(logLevel)
	if err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(controlAddr)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		return fmt.Errorf("-control %q: must be a loopback host:port", controlAddr)
	}
	opts := []kfake.Opt{kfake.Ports(ps...), kfake.WithLogger(kfake.BasicLogger(os.Stderr, lvl))}
	if dataDir != "" {
		opts = append(opts, kfake.DataDir(dataDir))
	}
	if syncWrites {
		opts = append(opts, kfake.SyncWrites())
	}
	if clusterID != "" {
		opts = append(opts, kfake.ClusterID(clusterID))
	}
	if len(bcfg) > 0 {
		opts = append(opts, kfake.BrokerConfigs(bcfg))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", controlAddr)
	if err != nil {
		c.Close()
		return fmt.Errorf("control channel: %w", err)
	}
	srv := &server{c: c, faults: map[string]*kfake.FaultHandle{}}
	go srv.serve(ln)
	nodes := make([]string, len(ps))
	for i := range ps {
		nodes[i] = strconv.Itoa(i) // kfake numbers its brokers from 0 in port order
	}
	fmt.Printf("KFAKE-READY brokers=%s control=%s nodes=%s\n",
		strings.Join(c.ListenAddrs(), ","), ln.Addr(), strings.Join(nodes, ","))
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	<-sigs
	ln.Close()
	c.Close()
	return nil
}

type server struct {
	c      *kfake.Cluster
	mu     sync.Mutex
	faults map[string]*kfake.FaultHandle
}

func (s *server) serve(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go s.conn(conn)
	}
}

func (s *server) conn(conn net.Conn) {
	defer conn.Close()
	in := bufio.NewScanner(conn)
	out := bufio.NewWriter(conn)
	for in.Scan() {
		reply, err := s.handle(in.Text())
		if err != nil {
			reply = "ERR " + strings.ReplaceAll(err.Error(), "\n", " ")
		} else {
			reply = strings.TrimSpace("OK " + reply)
		}
		fmt.Fprintln(out, reply)
		if out.Flush() != nil {
			return
		}
	}
}

func (s *server) handle(line string) (string, error) {
	cmd, err := parseCommand(line)
	if err != nil {
		return "", err
	}
	switch cmd.verb {
	case "PING":
		return "pong", nil
	case "FAULT":
		spec, err := parseFault(cmd)
		if err != nil {
			return "", err
		}
		return s.fault(spec)
	case "CLEAR":
		return s.clear(cmd.args)
	case "FAULTS":
		return s.list(), nil
	case "SHUFFLE":
		s.c.ShufflePartitionLeaders()
		return "", nil
	case "REHASH":
		s.c.RehashCoordinators()
		return "", nil
	case "MOVE":
		part, err := intArg(cmd.args, "partition", 0, true)
		if err != nil {
			return "", err
		}
		node, err := intArg(cmd.args, "node", 0, true)
		if err != nil {
			return "", err
		}
		was := s.c.LeaderFor(cmd.args["topic"], int32(part))
		if err := s.c.MoveTopicPartition(cmd.args["topic"], int32(part), int32(node)); err != nil {
			return "", err
		}
		return fmt.Sprintf("was=%d leader=%d", was, node), nil
	case "LEADER":
		part, err := intArg(cmd.args, "partition", 0, true)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("leader=%d", s.c.LeaderFor(cmd.args["topic"], int32(part))), nil
	}
	return "", fmt.Errorf("unhandled command %s", cmd.verb)
}

// appliedAnyway: the answers kfake gives after doing the work (a write that is
// stored but answered with an error), as its Fault documentation lists them for
// the requests a client of ktrial sends.
var appliedAnyway = map[int16][]*kerr.Error{
	int16(kmsg.Produce):         {kerr.RequestTimedOut, kerr.NotEnoughReplicasAfterAppend},
	int16(kmsg.OffsetCommit):    {kerr.RequestTimedOut},
	int16(kmsg.TxnOffsetCommit): {kerr.RequestTimedOut},
	int16(kmsg.CreateTopics):    {kerr.RequestTimedOut},
}

func (s *server) fault(spec faultSpec) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.faults[spec.id]; dup {
		return "", fmt.Errorf("FAULT: id %s is already installed", spec.id)
	}
	s.faults[spec.id] = s.c.Fault(kfake.Fault{
		Keys:  []kmsg.Key{kmsg.Key(spec.key)},
		Nodes: spec.nodes,
		Topic: spec.topic,
		Err:   spec.err,
		Count: spec.count,
	})
	applied := false
	for _, e := range appliedAnyway[spec.key] {
		applied = applied || e == spec.err
	}
	return fmt.Sprintf("id=%s api=%s error=%s code=%d applied=%t",
		spec.id, kmsg.NameForKey(spec.key), spec.err.Message, spec.err.Code, applied), nil
}

func (s *server) clear(args map[string]string) (string, error) {
	id, byID := args["id"]
	prefix, byPrefix := args["prefix"]
	if byID == byPrefix {
		return "", fmt.Errorf("CLEAR: give id= or prefix=")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if byID {
		h, ok := s.faults[id]
		if !ok {
			return "cleared=0 hits=0", nil // cleared before (idempotent)
		}
		h.Remove()
		delete(s.faults, id)
		return fmt.Sprintf("cleared=1 hits=%d", h.Hits()), nil
	}
	n, hits := 0, 0
	for fid, h := range s.faults {
		if strings.HasPrefix(fid, prefix) {
			h.Remove()
			delete(s.faults, fid)
			n, hits = n+1, hits+h.Hits()
		}
	}
	return fmt.Sprintf("cleared=%d hits=%d", n, hits), nil
}

func (s *server) list() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.faults))
	for id, h := range s.faults {
		ids = append(ids, fmt.Sprintf("%s:%d", id, h.Hits()))
	}
	sort.Strings(ids)
	return "faults=" + strings.Join(ids, ",")
}
