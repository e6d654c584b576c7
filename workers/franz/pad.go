package main

import "strings"

// maxValueBytes bounds open's value_bytes: far above any broker's largest message.
const maxValueBytes = 64 << 20

// padded is a produced record's value: v, space-padded to n bytes when it is shorter
// (open's value_bytes, docs/drivers.md; the txn-cost workload's message_bytes). A
// value already n bytes or longer, or n <= 0, is sent as it is.
func padded(v string, n int) []byte {
	if len(v) >= n {
		return []byte(v)
	}
	return []byte(v + strings.Repeat(" ", n-len(v)))
}
