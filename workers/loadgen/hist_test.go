package main

import (
	"math"
	"testing"
)

func TestBucketsAreOrderedAndClose(t *testing.T) {
	prev := -1
	for _, v := range []uint64{0, 1, 31, 32, 33, 63, 64, 100, 1000, 12345, 1 << 20, 5e6, 1 << 40} {
		i := bucketOf(v)
		if i < prev {
			t.Fatalf("bucket of %d (%d) is below the previous one (%d)", v, i, prev)
		}
		prev = i
		mid := bucketMid(i)
		if v > 0 && math.Abs(mid-float64(v))/float64(v) > 0.07 {
			t.Fatalf("value %d lands in bucket %d whose middle is %g (over 7%% off)", v, i, mid)
		}
	}
}

func TestQuantiles(t *testing.T) {
	var h hist
	for i := 1; i <= 1000; i++ {
		h.add(int64(i * 1000)) // 1..1000 ms
	}
	c := h.take()
	if c.total() != 1000 {
		t.Fatalf("total %d, want 1000", c.total())
	}
	for _, tc := range []struct{ q, want float64 }{{0.5, 500}, {0.99, 990}} {
		got := c.quantileMs(tc.q)
		if got == nil || math.Abs(*got-tc.want)/tc.want > 0.07 {
			t.Fatalf("q%g = %v, want ~%g", tc.q, got, tc.want)
		}
	}
	if h.take().total() != 0 {
		t.Fatal("take must zero the histogram")
	}
	var empty counts
	if empty.quantileMs(0.5) != nil {
		t.Fatal("an empty histogram has no quantile")
	}
}
