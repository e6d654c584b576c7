// Command ktrial-loadgen is ktrial's load generator (docs/load.md): franz-go producers
// offering messages at a target rate (open loop: the offered rate does not drop when
// the brokers slow down; what cannot be buffered is shed and counted) and consumers in
// one classic consumer group measuring end-to-end latency from a send-time stamp in
// each message.
//
// It writes one JSON object per line on stdout: a "start" line with the settings, a
// "second" line every interval (offered, produced, consumed, shed, errors, produce
// and end-to-end latency quantiles, per-consumer counts, the generator's own CPU) and
// a "final" line with the totals when it stops (SIGTERM, SIGINT or -duration). A
// setup failure is an "error" line and exit status 2. Logs go to stderr.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

type config struct {
	Brokers     string        `json:"brokers"`
	Topic       string        `json:"topic"`
	Partitions  int           `json:"partitions"`
	Replication int           `json:"replication"`
	Create      bool          `json:"create"`
	Rate        float64       `json:"rate"`
	Producers   int           `json:"producers"`
	Consumers   int           `json:"consumers"`
	Group       string        `json:"group"`
	Size        int           `json:"size"`
	Batch       int           `json:"batch"`
	BatchBytes  int           `json:"batch_bytes"`
	Acks        string        `json:"acks"`
	Idempotent  bool          `json:"idempotent"`
	Compression string        `json:"compression"`
	Linger      time.Duration `json:"-"`
	LingerMs    float64       `json:"linger_ms"`
	Duration    time.Duration `json:"-"`
	Interval    time.Duration `json:"-"`
	Drain       time.Duration `json:"-"`
	JoinWait    time.Duration `json:"-"`
	FromStart   bool          `json:"from_start"`
}

func parseFlags(args []string) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("ktrial-loadgen", flag.ContinueOnError)
	fs.StringVar(&c.Brokers, "brokers", "", "bootstrap servers, comma separated (required)")
	fs.StringVar(&c.Topic, "topic", "ktrial-load", "topic to produce to and consume from")
	fs.IntVar(&c.Partitions, "partitions", 6, "partitions when the topic is created (-create)")
	fs.IntVar(&c.Replication, "replication", 3, "replication factor when the topic is created")
	fs.BoolVar(&c.Create, "create", false, "create the topic first (an existing one is kept)")
	fs.Float64Var(&c.Rate, "rate", 1000, "messages per second offered, over all producers (0: as fast as the clients go, closed loop)")
	fs.IntVar(&c.Producers, "producers", 1, "producer clients")
	fs.IntVar(&c.Consumers, "consumers", 1, "consumer clients, in one consumer group")
	fs.StringVar(&c.Group, "group", "", "consumer group (default ktrial-load-<topic>)")
	fs.IntVar(&c.Size, "size", 256, "message size in bytes (at least 16)")
	fs.IntVar(&c.Batch, "batch", 50000, "records a producer buffers at most (franz-go's default); past that, offered messages are shed")
	fs.IntVar(&c.BatchBytes, "batch-bytes", 0, "max bytes of one record batch (Kafka's batch.size; 0: franz-go's default, 1 MB)")
	fs.StringVar(&c.Acks, "acks", "all", "all, 1 or 0")
	fs.BoolVar(&c.Idempotent, "idempotent", true, "idempotent producers (needs acks=all)")
	fs.StringVar(&c.Compression, "compression", "lz4", "none, gzip, snappy, lz4 or zstd")
	fs.DurationVar(&c.Linger, "linger", 5*time.Millisecond, "producer linger")
	fs.DurationVar(&c.Duration, "duration", 0, "stop after offering this long (0: at SIGTERM or SIGINT)")
	fs.DurationVar(&c.Interval, "interval", time.Second, "telemetry interval")
	fs.DurationVar(&c.Drain, "drain", 3*time.Second, "at the stop: how long consumers may catch up")
	fs.DurationVar(&c.JoinWait, "join-wait", 10*time.Second, "how long producers wait for the consumers' first assignment")
	fs.BoolVar(&c.FromStart, "from-start", true, "a new group reads from the topic's start (else its end)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	switch {
	case strings.TrimSpace(c.Brokers) == "":
		return nil, fmt.Errorf("-brokers is required")
	case c.Size < 16:
		return nil, fmt.Errorf("-size must be at least 16 (the stamp), got %d", c.Size)
	case c.Rate < 0:
		return nil, fmt.Errorf("-rate must be >= 0, got %g", c.Rate)
	case c.Producers < 0 || c.Consumers < 0 || c.Producers+c.Consumers == 0:
		return nil, fmt.Errorf("want at least one producer or consumer")
	case c.Batch < 1:
		return nil, fmt.Errorf("-batch must be >= 1")
	case c.BatchBytes < 0:
		return nil, fmt.Errorf("-batch-bytes must be >= 0")
	case c.Interval <= 0:
		return nil, fmt.Errorf("-interval must be > 0")
	case c.Idempotent && c.Acks != "all" && c.Acks != "-1":
		return nil, fmt.Errorf("idempotence needs -acks all (or -idempotent=false)")
	}
	if c.Group == "" {
		c.Group = "ktrial-load-" + c.Topic
	}
	c.LingerMs = float64(c.Linger) / float64(time.Millisecond)
	return c, nil
}

func main() {
	out := newEmitter(os.Stdout)
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		out.line(map[string]any{"type": "error", "message": err.Error()})
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, c, out); err != nil {
		out.line(map[string]any{"type": "error", "message": err.Error()})
		os.Exit(2)
	}
}

// emitter writes one JSON object per line.
type emitter struct{ enc *json.Encoder }

func newEmitter(f *os.File) *emitter { return &emitter{enc: json.NewEncoder(f)} }

func (e *emitter) line(v any) {
	if err := e.enc.Encode(v); err != nil {
		fmt.Fprintf(os.Stderr, "ktrial-loadgen: writing stdout: %v\n", err)
	}
}
