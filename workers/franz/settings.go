package main

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// setting turns one configuration value into client options.
type setting func(v any) ([]kgo.Opt, error)

func millis(f func(time.Duration) kgo.Opt) setting {
	return func(v any) ([]kgo.Opt, error) {
		n, err := number(v)
		if err != nil {
			return nil, err
		}
		return []kgo.Opt{f(time.Duration(n) * time.Millisecond)}, nil
	}
}

func producerMillis(f func(time.Duration) kgo.ProducerOpt) setting {
	return millis(func(d time.Duration) kgo.Opt { return f(d) })
}

func consumerMillis(f func(time.Duration) kgo.ConsumerOpt) setting {
	return millis(func(d time.Duration) kgo.Opt { return f(d) })
}

func groupMillis(f func(time.Duration) kgo.GroupOpt) setting {
	return millis(func(d time.Duration) kgo.Opt { return f(d) })
}

// settings: the names ktrial writes to test.json (Kafka's property names where one
// exists), each mapped onto franz-go options. An unknown name is an error.
var settings = map[string]setting{
	"acks": func(v any) ([]kgo.Opt, error) {
		switch fmt.Sprint(v) {
		case "all", "-1":
			return []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks())}, nil
		case "1":
			return []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck())}, nil
		case "0":
			return []kgo.Opt{kgo.RequiredAcks(kgo.NoAck())}, nil
		}
		return nil, fmt.Errorf("want all, 1 or 0")
	},
	"enable.idempotence": func(v any) ([]kgo.Opt, error) {
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("want true or false")
		}
		if b {
			return nil, nil
		}
		return []kgo.Opt{kgo.DisableIdempotentWrite()}, nil
	},
	"max.in.flight.requests.per.connection": func(v any) ([]kgo.Opt, error) {
		n, err := number(v)
		if err != nil {
			return nil, err
		}
		return []kgo.Opt{kgo.MaxProduceRequestsInflightPerBroker(int(n))}, nil
	},
	"linger.ms":              producerMillis(kgo.ProducerLinger),
	"request.timeout.ms":     producerMillis(kgo.ProduceRequestTimeout),
	"delivery.timeout.ms":    producerMillis(kgo.RecordDeliveryTimeout),
	"transaction.timeout.ms": producerMillis(kgo.TransactionTimeout),
	"retry.backoff.ms": func(v any) ([]kgo.Opt, error) {
		n, err := number(v)
		if err != nil {
			return nil, err
		}
		d := time.Duration(n) * time.Millisecond
		return []kgo.Opt{
			kgo.RetryBackoffFn(func(int) time.Duration { return d }),
			kgo.ConcurrentTransactionsBackoff(d),
		}, nil
	},
	"isolation.level": func(v any) ([]kgo.Opt, error) {
		switch fmt.Sprint(v) {
		case "read_committed":
			return []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted())}, nil
		case "read_uncommitted":
			return []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadUncommitted())}, nil
		}
		return nil, fmt.Errorf("want read_committed or read_uncommitted")
	},
	"auto.offset.reset": func(v any) ([]kgo.Opt, error) {
		switch fmt.Sprint(v) {
		case "earliest":
			return []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, nil
		case "latest":
			return []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd())}, nil
		}
		return nil, fmt.Errorf("want earliest or latest")
	},
	"fetch.max.wait.ms": consumerMillis(kgo.FetchMaxWait),
	// a group consumer's (subscribe mode); max.poll.interval.ms is kafka-clients'
	// name for the rebalance timeout
	"session.timeout.ms":                 groupMillis(kgo.SessionTimeout),
	"heartbeat.interval.ms":              groupMillis(kgo.HeartbeatInterval),
	"max.poll.interval.ms":               groupMillis(kgo.RebalanceTimeout),
	"socket.connection.setup.timeout.ms": millis(kgo.DialTimeout),
	"metadata.max.age.ms":                millis(kgo.MetadataMaxAge),
	"metadata.min.age.ms":                millis(kgo.MetadataMinAge),
	"request.timeout.overhead.ms":        millis(kgo.RequestTimeoutOverhead),
	"retry.timeout.ms":                   millis(kgo.RetryTimeout),
	// the worker process's Go scheduler: how many threads run Go code at once (0: the
	// Go default, one per CPU). Not a Kafka property. ktrial sets 1: a run has one
	// worker per logical process, and 64 of them with 2 each on 2 cores measured 769-805
	// sends+polls/s against 1,071 with 1 on the same cluster (bench/RESULTS.md, TXNPERF).
	"gomaxprocs": func(v any) ([]kgo.Opt, error) {
		n, err := number(v)
		if err != nil || n < 0 || n != float64(int(n)) {
			return nil, fmt.Errorf("want a whole number >= 0")
		}
		if n > 0 {
			runtime.GOMAXPROCS(int(n))
		}
		return nil, nil
	},
	// the transaction protocol: 2 (franz-go's default where the cluster finalised
	// transaction.version 2, KIP-890) or 1, the protocol before it (explicit
	// AddPartitionsToTxn / AddOffsetsToTxn, no epoch bump per transaction)
	"transaction.version": func(v any) ([]kgo.Opt, error) {
		switch fmt.Sprint(v) {
		case "2":
			return nil, nil
		case "1":
			// franz-go speaks v2 only with Produce v12+, EndTxn v5+ and
			// TxnOffsetCommit v5+: capping all three keeps every request at its
			// version-1 wire form
			vs := kversion.Stable()
			vs.SetMaxKeyVersion(int16(kmsg.Produce), 11)
			vs.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
			vs.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), 4)
			return []kgo.Opt{kgo.MaxVersions(vs)}, nil
		}
		return nil, fmt.Errorf("want 1 or 2")
	},
}

func number(v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case string:
		return strconv.ParseFloat(x, 64)
	}
	return 0, fmt.Errorf("want a number, got %v", v)
}

// options: the client options of an open request.
func options(w *worker, r *request) ([]kgo.Opt, error) {
	if strings.TrimSpace(r.Bootstrap) == "" {
		return nil, fmt.Errorf("open: bootstrap is empty")
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(r.Bootstrap, ",")...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.KeepControlRecords(), // markers move the reported position (see positions)
		kgo.ProducerLinger(0),
	}
	if lvl := os.Getenv("KTRIAL_FRANZ_LOG"); lvl != "" { // debug, info, warn or error
		l, ok := map[string]kgo.LogLevel{
			"debug": kgo.LogLevelDebug, "info": kgo.LogLevelInfo,
			"warn": kgo.LogLevelWarn, "error": kgo.LogLevelError,
		}[lvl]
		if !ok {
			return nil, fmt.Errorf("KTRIAL_FRANZ_LOG=%s: want debug, info, warn or error", lvl)
		}
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, l, nil)))
	}
	if r.ClientID != "" {
		opts = append(opts, kgo.ClientID(r.ClientID))
	}
	if r.TxnID != "" {
		opts = append(opts, kgo.TransactionalID(r.TxnID))
	}
	if r.Group != "" && r.Consumer {
		opts = append(opts, w.groupOptions(r.Group)...)
	}
	sec, err := securityOptions(r.Settings) // TLS and SASL, as one group (security.go)
	if err != nil {
		return nil, err
	}
	opts = append(opts, sec...)
	names := make([]string, 0, len(r.Settings))
	for k := range r.Settings {
		if !securityKeys[k] {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		f, ok := settings[k]
		if !ok {
			known := make([]string, 0, len(settings))
			for n := range settings {
				known = append(known, n)
			}
			sort.Strings(known)
			return nil, fmt.Errorf("unknown setting %q; the franz worker knows: %s", k, strings.Join(known, ", "))
		}
		o, err := f(r.Settings[k])
		if err != nil {
			return nil, fmt.Errorf("setting %s=%v: %v", k, r.Settings[k], err)
		}
		opts = append(opts, o...)
	}
	return opts, nil
}
