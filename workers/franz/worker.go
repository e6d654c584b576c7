package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// request is every call's fields; each call reads the ones it needs (docs/drivers.md).
type request struct {
	ID        int64          `json:"id"`
	Call      string         `json:"call"`
	Bootstrap string         `json:"bootstrap"`
	ClientID  string         `json:"client_id"`
	TxnID     string         `json:"txn_id"`
	Producer  bool           `json:"producer"`
	Consumer  bool           `json:"consumer"`
	Settings  map[string]any `json:"settings"`
	Records   []sendRecord   `json:"records"`
	TimeoutMs int            `json:"timeout_ms"`
	Max       int            `json:"max"`
	Group     string         `json:"group"`
	Topics    []string       `json:"topics"`
	Offsets   []tpOffset     `json:"offsets"`
	Abrupt    bool           `json:"abrupt"`
	// open: pad each produced value with spaces to this many bytes (0: as given)
	ValueBytes int `json:"value_bytes"`
}

type sendRecord struct {
	Op        int64  `json:"op"`
	I         int    `json:"i"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Value     string `json:"value"`
}

type tpOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// errRecord is how every error travels to ktrial (docs/drivers.md, "Error record").
type errRecord struct {
	Name             string `json:"name"`
	Code             int16  `json:"code,omitempty"`
	Message          string `json:"message"`
	Retriable        bool   `json:"retriable,omitempty"`
	Fatal            bool   `json:"fatal,omitempty"`
	TxnRequiresAbort bool   `json:"txn_requires_abort,omitempty"`
	Refused          bool   `json:"refused,omitempty"`
	Topic            string `json:"topic,omitempty"`
	Partition        *int32 `json:"partition,omitempty"`
}

func failure(e errRecord) map[string]any { return map[string]any{"ok": false, "error": e} }

func success() map[string]any { return map[string]any{"ok": true} }

// delivery is one send's outcome: an offset, or an error.
type delivery struct {
	Op     int64      `json:"op"`
	I      int        `json:"i"`
	Offset *int64     `json:"offset,omitempty"`
	Error  *errRecord `json:"error,omitempty"`
}

type tp struct {
	topic string
	part  int32
}

type worker struct {
	cl       *kgo.Client
	producer bool
	consumer bool
	txn      bool
	txnName  string
	// open's value_bytes: produced values are space-padded to it (pad.go)
	valueBytes int

	mu          sync.Mutex
	reported    []delivery
	outstanding int

	// the partitions consumed and the next offset of each: set by assign in assign mode,
	// by the group's rebalance callbacks in subscribe mode (under mu)
	assigned    map[tp]bool
	position    map[tp]int64
	producedTxn bool
	inTxn       bool // between begin and the end of the transaction
	txnRead     bool // a fetch of the open transaction returned records

	group  bool            // a group consumer (subscribe mode, group.go)
	topics map[string]bool // its subscription
	events []rebalanceEvent
}

// handle answers one request; a group consumer's assignment changes since the last
// reply ride along as its "rebalance" events.
func (w *worker) handle(r *request) map[string]any {
	reply := w.call(r)
	if w.group {
		if ev := w.takeEvents(); len(ev) > 0 {
			reply["rebalance"] = ev
		}
	}
	return reply
}

func (w *worker) call(r *request) map[string]any {
	if r.Call != "open" && w.cl == nil {
		return failure(errRecord{Name: "NotOpen", Message: "the first call must be open", Fatal: true})
	}
	switch r.Call {
	case "open":
		return w.open(r)
	case "produce":
		return w.produce(r)
	case "flush":
		return w.flush(r)
	case "fetch":
		return w.fetch(r)
	case "begin":
		if err := w.cl.BeginTransaction(); err != nil {
			return failure(describe(err))
		}
		w.producedTxn, w.inTxn, w.txnRead = false, true, false
		return success()
	case "send_offsets":
		return w.sendOffsets(r)
	case "commit":
		return w.endTxn(r, kgo.TryCommit)
	case "abort":
		return w.endTxn(r, kgo.TryAbort)
	case "subscribe":
		return w.subscribe(r)
	case "commit_offsets":
		return w.commitOffsets(r)
	case "assign":
		return w.assign(r)
	case "seek":
		return w.seek(r)
	case "position":
		return w.positions(r)
	case "close":
		w.shutdown(!r.Abrupt, r.TimeoutMs)
		return success()
	}
	return failure(errRecord{Name: "BadRequest", Message: fmt.Sprintf("unknown call %q", r.Call)})
}

func (w *worker) ctx(ms int) (context.Context, context.CancelFunc) {
	if ms <= 0 {
		ms = 1
	}
	return context.WithTimeout(context.Background(), time.Duration(ms)*time.Millisecond)
}

func (w *worker) open(r *request) map[string]any {
	if w.cl != nil {
		return failure(errRecord{Name: "BadRequest", Message: "already open"})
	}
	if r.ValueBytes < 0 || r.ValueBytes > maxValueBytes {
		msg := fmt.Sprintf("value_bytes must be in [0, %d], got %d", maxValueBytes, r.ValueBytes)
		return failure(errRecord{Name: "BadSettings", Message: msg, Fatal: true})
	}
	opts, err := options(w, r)
	if err != nil {
		return failure(errRecord{Name: "BadSettings", Message: err.Error(), Fatal: true})
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return failure(errRecord{Name: "BadSettings", Message: err.Error(), Fatal: true})
	}
	w.cl, w.producer, w.consumer, w.txn, w.txnName = cl, r.Producer, r.Consumer, r.TxnID != "", r.TxnID
	w.valueBytes = r.ValueBytes
	w.mu.Lock()
	w.assigned, w.position = map[tp]bool{}, map[tp]int64{}
	w.mu.Unlock()
	w.group, w.topics = r.Group != "" && r.Consumer, map[string]bool{}
	reply := success()
	reply["value_bytes"] = w.valueBytes // the padding in use: ktrial checks it was understood
	if w.txn {
		// Initialise the producer id now: this fences a predecessor with the same
		// transactional id and settles a transaction it left open.
		ctx, cancel := w.ctx(r.TimeoutMs)
		defer cancel()
		id, epoch, err := cl.ProducerID(ctx)
		if err != nil {
			return failure(describe(err))
		}
		reply["producer_id"], reply["epoch"] = id, epoch
		if proto := txnProtocol(ctx, cl, r.Settings); proto != "" {
			reply["txn_protocol"] = proto
		}
	}
	return reply
}

// txnProtocol is the transaction protocol this client uses, decided as franz-go decides
// it (it does not say): "v2" (KIP-890) when the brokers' finalized transaction.version
// is 2 or more and the request versions were not capped (the worker's
// transaction.version=1 setting caps them), else "v1"; "" when the brokers could not be
// asked.
func txnProtocol(ctx context.Context, cl *kgo.Client, settings map[string]any) string {
	if v, ok := settings["transaction.version"]; ok && fmt.Sprint(v) == "1" {
		return "v1"
	}
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 {
		return ""
	}
	for _, f := range resp.FinalizedFeatures {
		if f.Name == "transaction.version" && f.MaxVersionLevel >= 2 {
			return "v2"
		}
	}
	return "v1"
}

func (w *worker) produce(r *request) map[string]any {
	if !w.producer {
		return failure(errRecord{Name: "NoProducer", Message: "opened without a producer", Refused: true})
	}
	for _, s := range r.Records {
		rec := w.record(s)
		op, i := s.Op, s.I
		w.mu.Lock()
		w.outstanding++
		w.mu.Unlock()
		w.cl.Produce(context.Background(), rec, func(rec *kgo.Record, err error) {
			d := delivery{Op: op, I: i}
			if err != nil {
				e := describe(err)
				d.Error = &e
			} else {
				off := rec.Offset
				d.Offset = &off
			}
			w.mu.Lock()
			w.outstanding--
			w.reported = append(w.reported, d)
			w.mu.Unlock()
		})
		if w.txn {
			w.producedTxn = true
		}
	}
	return success()
}

// record is the Kafka record of one `produce` record: its exact partition, and its
// value padded to open's value_bytes.
func (w *worker) record(s sendRecord) *kgo.Record {
	return &kgo.Record{Topic: s.Topic, Partition: s.Partition, Value: padded(s.Value, w.valueBytes)}
}

func (w *worker) flush(r *request) map[string]any {
	if w.producer {
		ctx, cancel := w.ctx(r.TimeoutMs)
		_ = w.cl.Flush(ctx) // a timeout shows as unreported sends
		cancel()
	}
	w.mu.Lock()
	got, left := w.reported, w.outstanding
	w.reported = nil
	w.mu.Unlock()
	if got == nil {
		got = []delivery{}
	}
	reply := success()
	reply["results"], reply["unreported"] = got, left
	return reply
}

func (w *worker) fetch(r *request) map[string]any {
	if !w.consumer {
		return failure(errRecord{Name: "NoConsumer", Message: "opened without a consumer"})
	}
	if w.group && !(w.inTxn && w.txnRead) {
		// rebalances wait while this member holds records it polled, until the
		// transaction that read them ends (group.go)
		w.cl.AllowRebalance()
	}
	ctx, cancel := w.ctx(r.TimeoutMs)
	fs := w.cl.PollRecords(ctx, r.Max)
	cancel()
	records := [][]any{}
	events := []errRecord{}
	fs.EachError(func(t string, p int32, err error) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return
		}
		e := describe(err)
		if t != "" {
			e.Topic = t
			pp := p
			e.Partition = &pp
		}
		events = append(events, e)
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	fs.EachRecord(func(rec *kgo.Record) {
		k := tp{rec.Topic, rec.Partition}
		if !w.assigned[k] {
			return // left over from before an assign that dropped it
		}
		w.position[k] = rec.Offset + 1
		if rec.Attrs.IsControl() {
			return // a transaction marker: moves the position, is not a record
		}
		var v any
		if rec.Value != nil {
			v = string(rec.Value)
		}
		records = append(records, []any{rec.Topic, rec.Partition, rec.Offset, v})
	})
	if w.inTxn && len(records) > 0 {
		w.txnRead = true
	}
	reply := success()
	reply["records"], reply["errors"] = records, events
	return reply
}

func (w *worker) sendOffsets(r *request) map[string]any {
	if !w.producedTxn {
		// Nothing was produced in this transaction: it has no effect to commit the
		// offsets with, and ending it sends no EndTxn (docs/drivers.md).
		reply := success()
		reply["skipped"] = true
		return reply
	}
	ctx, cancel := w.ctx(r.TimeoutMs)
	defer cancel()
	id, epoch, err := w.cl.ProducerID(ctx)
	if err != nil {
		return failure(describe(err))
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = w.txnID(), id, epoch, r.Group
	for {
		resp, err := add.RequestWith(ctx, w.cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if errors.Is(err, kerr.ConcurrentTransactions) {
			select {
			case <-time.After(10 * time.Millisecond):
				continue
			case <-ctx.Done():
			}
		}
		if err != nil {
			return failure(describe(err))
		}
		break
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group = w.txnID(), r.Group
	commit.ProducerID, commit.ProducerEpoch, commit.Generation = id, epoch, -1
	if w.group {
		// the member's generation the records were read in (rebalances wait until the
		// transaction ends): a zombie of an older generation is refused by the broker
		member, gen := w.cl.GroupMetadata()
		commit.MemberID, commit.Generation = member, gen
	}
	byTopic := map[string]int{}
	for _, o := range r.Offsets {
		i, ok := byTopic[o.Topic]
		if !ok {
			t := kmsg.NewTxnOffsetCommitRequestTopic()
			t.Topic = o.Topic
			commit.Topics = append(commit.Topics, t)
			i = len(commit.Topics) - 1
			byTopic[o.Topic] = i
		}
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = o.Partition, o.Offset, -1
		commit.Topics[i].Partitions = append(commit.Topics[i].Partitions, p)
	}
	resp, err := commit.RequestWith(ctx, w.cl)
	if err != nil {
		return failure(describe(err))
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return failure(describe(err))
			}
		}
	}
	return success()
}

func (w *worker) txnID() string { return w.txnName }

func (w *worker) endTxn(r *request, how kgo.TransactionEndTry) map[string]any {
	ctx, cancel := w.ctx(r.TimeoutMs)
	defer cancel()
	w.inTxn = false // whatever the outcome: a failed end retires the process
	if how == kgo.TryAbort {
		if err := w.cl.AbortBufferedRecords(ctx); err != nil {
			return failure(describe(err))
		}
	}
	if err := w.cl.EndTransaction(ctx, how); err != nil {
		return failure(describe(err))
	}
	return success()
}

// assign makes the consumed partitions exactly r.Offsets, each at its offset.
func (w *worker) assign(r *request) map[string]any {
	if !w.consumer {
		return failure(errRecord{Name: "NoConsumer", Message: "opened without a consumer"})
	}
	if w.group {
		return failure(errRecord{Name: "GroupConsumer", Message: "assign: this consumer subscribed (its group assigns)", Refused: true})
	}
	want := map[tp]int64{}
	for _, o := range r.Offsets {
		want[tp{o.Topic, o.Partition}] = o.Offset
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	drop := map[string][]int32{}
	for k := range w.assigned {
		if _, ok := want[k]; !ok {
			drop[k.topic] = append(drop[k.topic], k.part)
			delete(w.assigned, k)
			delete(w.position, k)
		}
	}
	if len(drop) > 0 {
		w.cl.RemoveConsumePartitions(drop)
	}
	add := map[string]map[int32]kgo.Offset{}
	set := map[string]map[int32]kgo.EpochOffset{}
	for k, off := range want {
		if w.assigned[k] {
			if set[k.topic] == nil {
				set[k.topic] = map[int32]kgo.EpochOffset{}
			}
			set[k.topic][k.part] = kgo.EpochOffset{Epoch: -1, Offset: off}
		} else {
			if add[k.topic] == nil {
				add[k.topic] = map[int32]kgo.Offset{}
			}
			add[k.topic][k.part] = kgo.NewOffset().At(off)
			w.assigned[k] = true
		}
		w.position[k] = off
	}
	if len(set) > 0 {
		w.cl.SetOffsets(set)
	}
	if len(add) > 0 {
		w.cl.AddConsumePartitions(add)
	}
	return success()
}

func (w *worker) seek(r *request) map[string]any {
	set := map[string]map[int32]kgo.EpochOffset{}
	w.mu.Lock()
	for _, o := range r.Offsets {
		k := tp{o.Topic, o.Partition}
		if !w.assigned[k] {
			w.mu.Unlock()
			return failure(errRecord{Name: "NotAssigned", Message: fmt.Sprintf("seek %s/%d: not assigned", o.Topic, o.Partition)})
		}
		if set[o.Topic] == nil {
			set[o.Topic] = map[int32]kgo.EpochOffset{}
		}
		set[o.Topic][o.Partition] = kgo.EpochOffset{Epoch: -1, Offset: o.Offset}
		w.position[k] = o.Offset
	}
	// not under mu: a group's SetOffsets may wait for a rebalance callback, which takes mu
	w.mu.Unlock()
	w.cl.SetOffsets(set)
	return success()
}

// positions: the next offset per partition (past records and transaction markers
// the consumer returned or skipped), -1 when unknown.
func (w *worker) positions(r *request) map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]tpOffset, 0, len(r.Offsets))
	for _, o := range r.Offsets {
		k := tp{o.Topic, o.Partition}
		off, ok := w.position[k]
		if !ok {
			off = -1
		}
		out = append(out, tpOffset{o.Topic, o.Partition, off})
	}
	reply := success()
	reply["positions"] = out
	return reply
}

func (w *worker) shutdown(graceful bool, timeoutMs ...int) {
	if w.cl == nil {
		return
	}
	if graceful && w.producer {
		ms := 3000
		if len(timeoutMs) > 0 && timeoutMs[0] > 0 {
			ms = timeoutMs[0]
		}
		ctx, cancel := w.ctx(ms)
		_ = w.cl.Flush(ctx)
		cancel()
	}
	if w.group {
		// leaves the group (its partitions move at once); plain Close would wait forever
		// for a rebalance this member blocks by holding polled records
		w.cl.CloseAllowingRebalance()
	} else {
		w.cl.Close()
	}
	w.cl = nil
}

// protocolNames: the protocol's current name where kerr keeps an older one, so that
// every worker names a broker's error alike (docs/drivers.md, "Error record").
var protocolNames = map[int16]string{
	6: "NOT_LEADER_OR_FOLLOWER", // kerr: NOT_LEADER_FOR_PARTITION (renamed in Kafka 2.6)
}

// describe turns a client error into the error record ktrial classifies.
func describe(err error) errRecord {
	r := errRecord{Message: err.Error()}
	var ke *kerr.Error
	var loss *kgo.ErrDataLoss
	switch {
	case errors.As(err, &ke):
		r.Name, r.Code, r.Retriable = ke.Message, ke.Code, ke.Retriable
		if renamed, ok := protocolNames[ke.Code]; ok {
			r.Name = renamed
		}
		r.TxnRequiresAbort = errors.Is(err, kerr.TransactionAbortable)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		r.Name, r.Retriable = "Timeout", true
	case errors.Is(err, kgo.ErrRecordTimeout):
		r.Name, r.Retriable = "RecordTimeout", true
	case errors.Is(err, kgo.ErrRecordRetries):
		r.Name = "RecordRetries"
	case errors.Is(err, kgo.ErrAborting):
		r.Name = "Aborting"
	case errors.Is(err, kgo.ErrMaxBuffered):
		r.Name, r.Refused = "MaxBuffered", true
	case errors.Is(err, kgo.ErrClientClosed):
		r.Name, r.Fatal = "ClientClosed", true
	case errors.As(err, &loss):
		r.Name = "DataLoss"
	default:
		r.Name = "ClientError"
		if strings.Contains(err.Error(), "not in a transaction") ||
			strings.Contains(err.Error(), "not transactional") {
			r.Refused = true
		}
	}
	if strings.Contains(err.Error(), "fatal, unrecoverable") {
		r.Fatal = true
	}
	return r
}
