package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// stats are the counters every goroutine adds to; the reporter takes them each interval.
type stats struct {
	offered, produced, shed, errors atomic.Int64
	consumed                        []atomic.Int64 // per consumer
	produceLat, e2eLat              hist
	lastErr                         atomic.Value // string
}

func (s *stats) fail(err error) {
	s.errors.Add(1)
	s.lastErr.Store(err.Error())
}

type producer struct {
	cl      *kgo.Client
	c       *config
	s       *stats
	pool    sync.Pool
	payload []byte
	seq     uint64
	promise func(*kgo.Record, error)
}

func newProducer(c *config, s *stats, id int) (*producer, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(c.Brokers, ",")...),
		kgo.ClientID(fmt.Sprintf("ktrial-load-p%d", id)),
		kgo.DefaultProduceTopic(c.Topic),
		kgo.MaxBufferedRecords(c.Batch),
		kgo.ProducerLinger(c.Linger),
	}
	switch c.Acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	default:
		return nil, fmt.Errorf("-acks: want all, 1 or 0, got %q", c.Acks)
	}
	if !c.Idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if c.BatchBytes > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(int32(c.BatchBytes)))
	}
	codec, err := compression(c.Compression)
	if err != nil {
		return nil, err
	}
	opts = append(opts, kgo.ProducerBatchCompression(codec))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	// the filler is random capital letters, as Kafka's ProducerPerformance writes
	rng := rand.New(rand.NewSource(int64(id) + 1))
	payload := make([]byte, c.Size)
	for i := range payload {
		payload[i] = byte('A' + rng.Intn(26))
	}
	p := &producer{cl: cl, c: c, s: s, payload: payload}
	// records (and their value buffers) are reused once their promise has run
	p.pool.New = func() any { return &kgo.Record{Value: make([]byte, c.Size)} }
	p.promise = p.done
	return p, nil
}

func compression(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("-compression: want none, gzip, snappy, lz4 or zstd, got %q", name)
}

// offer hands one message stamped `stampNs` (its scheduled send time) to the client:
// without blocking in open loop (a full buffer sheds it), blocking in closed loop.
func (p *producer) offer(stampNs int64, block bool) {
	r := p.pool.Get().(*kgo.Record)
	*r = kgo.Record{Value: r.Value[:p.c.Size]}
	copy(r.Value, p.payload)
	binary.BigEndian.PutUint64(r.Value[0:8], uint64(stampNs))
	p.seq++
	binary.BigEndian.PutUint64(r.Value[8:16], p.seq)
	p.s.offered.Add(1)
	// a background context: records buffered at the stop still go out
	if block {
		p.cl.Produce(context.Background(), r, p.promise)
	} else {
		p.cl.TryProduce(context.Background(), r, p.promise)
	}
}

func (p *producer) done(r *kgo.Record, err error) {
	switch {
	case err == nil:
		p.s.produced.Add(1)
		stamp := int64(binary.BigEndian.Uint64(r.Value[0:8]))
		p.s.produceLat.add((time.Now().UnixNano() - stamp) / 1000)
	case errors.Is(err, kgo.ErrMaxBuffered):
		p.s.shed.Add(1)
	default:
		p.s.fail(err)
	}
	p.pool.Put(r)
}

// runOpen offers `rate` messages a second from `start` until ctx ends, each stamped
// with its scheduled time: a producer that falls behind offers the missed messages at
// once, so the offered rate does not depend on how fast the brokers answer.
func (p *producer) runOpen(ctx context.Context, rate float64, start time.Time) {
	tick := time.Second / 500
	if per := time.Duration(float64(time.Second) / rate); per > tick {
		tick = min(per, 50*time.Millisecond)
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	startNs := start.UnixNano()
	var sent int64
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			due := int64(rate*now.Sub(start).Seconds()) - sent
			for i := int64(0); i < due; i++ {
				p.offer(startNs+int64(float64(sent+i)/rate*1e9), false)
			}
			sent += max(due, 0)
		}
	}
}

// runClosed offers as fast as the client buffers (the -rate 0 mode, to compare
// with ProducerPerformance --throughput -1).
func (p *producer) runClosed(ctx context.Context) {
	for ctx.Err() == nil {
		p.offer(time.Now().UnixNano(), true)
	}
}

type consumer struct {
	cl       *kgo.Client
	s        *stats
	id       int
	assigned chan struct{}
	once     sync.Once
}

func newConsumer(c *config, s *stats, id int) (*consumer, error) {
	k := &consumer{s: s, id: id, assigned: make(chan struct{})}
	reset := kgo.NewOffset().AtStart()
	if !c.FromStart {
		reset = kgo.NewOffset().AtEnd()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(c.Brokers, ",")...),
		kgo.ClientID(fmt.Sprintf("ktrial-load-c%d", id)),
		kgo.ConsumerGroup(c.Group),
		kgo.ConsumeTopics(c.Topic),
		kgo.ConsumeResetOffset(reset),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			k.once.Do(func() { close(k.assigned) })
		}),
	)
	if err != nil {
		return nil, err
	}
	k.cl = cl
	return k, nil
}

func (k *consumer) run(ctx context.Context) {
	for {
		fetches := k.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		fetches.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.Canceled) {
				k.s.fail(err)
			}
		})
		now := time.Now().UnixNano()
		n := int64(0)
		fetches.EachRecord(func(r *kgo.Record) {
			n++
			if len(r.Value) >= 8 {
				k.s.e2eLat.add((now - int64(binary.BigEndian.Uint64(r.Value[0:8]))) / 1000)
			}
		})
		k.s.consumed[k.id].Add(n)
	}
}

// createTopic creates the topic; one that exists already is kept as it is.
func createTopic(ctx context.Context, c *config) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.Brokers, ",")...))
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic = c.Topic
	t.NumPartitions = int32(c.Partitions)
	t.ReplicationFactor = int16(c.Replication)
	req.Topics = append(req.Topics, t)
	req.TimeoutMillis = 30000
	cctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	resp, err := req.RequestWith(cctx, cl)
	if err != nil {
		return fmt.Errorf("creating topic %s: %w", c.Topic, err)
	}
	for _, rt := range resp.Topics {
		if e := kerr.ErrorForCode(rt.ErrorCode); e != nil && !errors.Is(e, kerr.TopicAlreadyExists) {
			return fmt.Errorf("creating topic %s: %w", c.Topic, e)
		}
	}
	return nil
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

func run(ctx context.Context, c *config, out *emitter) error {
	if c.Create {
		if err := createTopic(ctx, c); err != nil {
			return err
		}
	}
	s := &stats{consumed: make([]atomic.Int64, c.Consumers)}
	var consumers []*consumer
	for i := 0; i < c.Consumers; i++ {
		k, err := newConsumer(c, s, i)
		if err != nil {
			return err
		}
		consumers = append(consumers, k)
	}
	var producers []*producer
	for i := 0; i < c.Producers; i++ {
		p, err := newProducer(c, s, i)
		if err != nil {
			return err
		}
		producers = append(producers, p)
	}
	consumeCtx, stopConsumers := context.WithCancel(context.Background())
	var cwg sync.WaitGroup
	for _, k := range consumers {
		cwg.Add(1)
		go func() { defer cwg.Done(); k.run(consumeCtx) }()
	}
	// producers start once the group has its first assignment (or after -join-wait),
	// so the first seconds' end-to-end latency is not the group's join time
	if len(consumers) > 0 {
		wait := time.NewTimer(c.JoinWait)
		select {
		case <-consumers[0].assigned:
		case <-wait.C:
			fmt.Fprintf(os.Stderr, "ktrial-loadgen: no assignment after %s; producing anyway\n", c.JoinWait)
		case <-ctx.Done():
		}
		wait.Stop()
	}
	if c.Duration > 0 { // counted from the start of offering, not of the process
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Duration)
		defer cancel()
	}
	start := time.Now()
	out.line(map[string]any{"type": "start", "time": unixSeconds(start), "config": c})
	rep := newReporter(s, producers, start, out)
	repDone := make(chan struct{})
	repStop := make(chan struct{})
	go func() { defer close(repDone); rep.loop(c.Interval, repStop) }()

	var pwg sync.WaitGroup
	for _, p := range producers {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			if c.Rate > 0 {
				p.runOpen(ctx, c.Rate/float64(len(producers)), start)
			} else {
				p.runClosed(ctx)
			}
		}()
	}
	<-ctx.Done()
	stopped := time.Now()
	pwg.Wait()
	// the stop: what is buffered goes out (bounded), consumers catch up (bounded)
	fctx, cancel := context.WithTimeout(context.Background(), c.Drain)
	for _, p := range producers {
		_ = p.cl.Flush(fctx)
	}
	cancel()
	deadline := stopped.Add(c.Drain)
	for len(consumers) > 0 && time.Now().Before(deadline) && s.consumedTotal()+rep.consumedSoFar() < s.produced.Load()+rep.producedSoFar() {
		time.Sleep(20 * time.Millisecond)
	}
	close(repStop)
	<-repDone
	stopConsumers()
	cwg.Wait()
	for _, p := range producers {
		p.cl.Close()
	}
	for _, k := range consumers {
		k.cl.Close() // leaves the group
	}
	rep.final(stopped)
	return nil
}

func (s *stats) consumedTotal() int64 {
	var n int64
	for i := range s.consumed {
		n += s.consumed[i].Load()
	}
	return n
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
