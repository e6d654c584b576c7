package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// classifyTable writes the error record of each franz-go error a run meets, one JSON
// line per case ({"case", "record"}); `ktrial-franz --classify-table` runs it, and
// ktrial's unit tests put each record through the shared rules
// (tests/workloads/worker/test_client_tables.py).
func classifyTable(out io.Writer) {
	cases := []struct {
		name string
		err  error
	}{
		{"not_leader", kerr.NotLeaderForPartition},
		{"not_enough_replicas", kerr.NotEnoughReplicas},
		{"delivery_timeout", kgo.ErrRecordTimeout},
		{"retries_exhausted", kgo.ErrRecordRetries},
		{"call_timeout", context.DeadlineExceeded},
		{"fenced", kerr.ProducerFenced},
		{"epoch", kerr.InvalidProducerEpoch},
		{"out_of_order", kerr.OutOfOrderSequenceNumber},
		{"unknown_producer", kerr.UnknownProducerID},
		{"invalid_txn_state", kerr.InvalidTxnState},
		{"concurrent_transactions", kerr.ConcurrentTransactions},
		{"too_large", kerr.MessageTooLarge},
		{"topic_authorization", kerr.TopicAuthorizationFailed},
		{"txn_id_authorization", kerr.TransactionalIDAuthorizationFailed},
		{"abortable", kerr.TransactionAbortable},
		{"coordinator", kerr.CoordinatorNotAvailable},
		{"max_buffered", kgo.ErrMaxBuffered},
		{"aborting", kgo.ErrAborting},
		{"client_closed", kgo.ErrClientClosed},
		{"fatal_wrapped", fmt.Errorf("producer id: %w", fmt.Errorf("fatal, unrecoverable: %w", kerr.InvalidProducerIDMapping))},
		{"not_in_txn", fmt.Errorf("cannot produce: not in a transaction")},
	}
	enc := json.NewEncoder(out)
	for _, c := range cases {
		_ = enc.Encode(map[string]any{"case": c.name, "record": describe(c.err)})
	}
}
