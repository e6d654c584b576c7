package main

import (
	"context"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Subscribe mode (docs/drivers.md, "Subscribe mode"): the consumer is a member of the
// run's group, which assigns it partitions of the topics it subscribed to.
//
// Rebalances happen only where ktrial can see them: the client blocks rebalancing
// from the moment a poll returns records (BlockRebalanceOnPoll) and the worker allows
// it again only at the start of a fetch, and not inside a transaction that already
// read records. So the partitions a transaction read are this member's until the
// transaction ends, and the offsets it commits carry the generation they were read in. Each assignment change is reported
// to ktrial as a rebalance event on the next reply.

// rebalanceEvent is one assignment change: "assigned", "revoked" or "lost".
type rebalanceEvent struct {
	Type       string     `json:"type"`
	Partitions []tpOffset `json:"partitions"`
}

func (w *worker) groupOptions(group string) []kgo.Opt {
	note := func(kind string) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, m map[string][]int32) { w.rebalanced(kind, m) }
	}
	return []kgo.Opt{
		kgo.ConsumerGroup(group),
		kgo.DisableAutoCommit(), // offsets are committed only as ktrial asks
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(note("assigned")),
		kgo.OnPartitionsRevoked(note("revoked")),
		kgo.OnPartitionsLost(note("lost")),
	}
}

// rebalanced runs on franz-go's group goroutine: it records the change for the next reply
// and keeps the worker's view of its partitions (what fetch returns, what seek accepts).
func (w *worker) rebalanced(kind string, m map[string][]int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ev := rebalanceEvent{Type: kind, Partitions: []tpOffset{}}
	topics := make([]string, 0, len(m))
	for t := range m {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		parts := append([]int32(nil), m[t]...)
		sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
		for _, p := range parts {
			k := tp{t, p}
			if kind == "assigned" {
				w.assigned[k] = true
			} else {
				delete(w.assigned, k)
			}
			delete(w.position, k) // unknown until a fetch returns (or a seek sets it)
			ev.Partitions = append(ev.Partitions, tpOffset{Topic: t, Partition: p, Offset: -1})
		}
	}
	if len(ev.Partitions) > 0 { // franz-go calls revoked with nothing at a session's end
		w.events = append(w.events, ev)
	}
}

// takeEvents: the assignment changes since the last reply, for this one.
func (w *worker) takeEvents() []rebalanceEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	ev := w.events
	w.events = nil
	return ev
}

// subscribe makes the consumed topics exactly r.Topics; the group assigns partitions.
func (w *worker) subscribe(r *request) map[string]any {
	if !w.consumer || !w.group {
		return failure(errRecord{Name: "NotGroupConsumer", Message: "subscribe needs a consumer opened with a group", Refused: true})
	}
	want := map[string]bool{}
	var add, drop []string
	for _, t := range r.Topics {
		want[t] = true
		if !w.topics[t] {
			add = append(add, t)
		}
	}
	for t := range w.topics {
		if !want[t] {
			drop = append(drop, t)
		}
	}
	if !w.inTxn {
		w.cl.AllowRebalance() // the change rebalances the group
	}
	if len(drop) > 0 {
		w.cl.PurgeTopicsFromConsuming(drop...)
	}
	if len(add) > 0 {
		w.cl.AddConsumeTopics(add...)
	}
	w.topics = want
	return success()
}

// commitOffsets commits consumer offsets for the group, outside any transaction,
// asynchronously and best effort (subscribe mode without transactions).
func (w *worker) commitOffsets(r *request) map[string]any {
	if !w.group {
		return failure(errRecord{Name: "NotGroupConsumer", Message: "commit_offsets needs a group consumer", Refused: true})
	}
	offsets := map[string]map[int32]kgo.EpochOffset{}
	for _, o := range r.Offsets {
		if offsets[o.Topic] == nil {
			offsets[o.Topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[o.Topic][o.Partition] = kgo.EpochOffset{Epoch: -1, Offset: o.Offset}
	}
	ms := r.TimeoutMs
	if ms <= 0 {
		ms = 5000
	}
	// CommitOffsets may wait for a join in progress (which may wait for this worker's
	// next fetch to allow it): off the request loop, bounded, its context released
	// once the commit is answered.
	cl := w.cl
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(ms)*time.Millisecond)
		cl.CommitOffsets(ctx, offsets, func(*kgo.Client, *kmsg.OffsetCommitRequest, *kmsg.OffsetCommitResponse, error) {
			cancel()
		})
	}()
	return success()
}
