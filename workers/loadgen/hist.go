package main

import (
	"math/bits"
	"sync/atomic"
)

// A latency histogram in microseconds with log-linear buckets: values below 32 are
// exact, above that each power of two is split into 16 buckets (at most ~6% error).
// Writers add with atomics (many goroutines, no lock); the reporter takes the counts
// out once per interval with swap.

const (
	subBits  = 4
	nBuckets = 64 << subBits
)

type hist struct {
	b [nBuckets]atomic.Uint64
}

// bucketOf is the bucket of a value in microseconds.
func bucketOf(v uint64) int {
	if v < 1<<(subBits+1) {
		return int(v)
	}
	e := bits.Len64(v) - (subBits + 1)
	i := e<<subBits + int(v>>uint(e))
	if i >= nBuckets {
		return nBuckets - 1
	}
	return i
}

// bucketMid is the middle of a bucket's range, in microseconds.
func bucketMid(i int) float64 {
	if i < 1<<(subBits+1) {
		return float64(i)
	}
	e := i>>subBits - 1
	m := i - e<<subBits
	lo := uint64(m) << uint(e)
	return float64(lo) + float64(uint64(1)<<uint(e))/2
}

func (h *hist) add(us int64) {
	if us < 0 {
		us = 0
	}
	h.b[bucketOf(uint64(us))].Add(1)
}

// take moves the counts into a snapshot and zeroes the histogram.
func (h *hist) take() *counts {
	c := &counts{}
	for i := range h.b {
		c.b[i] = h.b[i].Swap(0)
	}
	return c
}

// counts is a plain (single-goroutine) copy of a histogram's counts.
type counts struct {
	b [nBuckets]uint64
}

func (c *counts) merge(o *counts) {
	for i := range c.b {
		c.b[i] += o.b[i]
	}
}

func (c *counts) total() uint64 {
	var n uint64
	for _, v := range c.b {
		n += v
	}
	return n
}

// quantileMs is the q-quantile in milliseconds; nil when there are no values.
func (c *counts) quantileMs(q float64) *float64 {
	n := c.total()
	if n == 0 {
		return nil
	}
	rank := uint64(q * float64(n))
	if float64(rank) < q*float64(n) {
		rank++
	}
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, v := range c.b {
		seen += v
		if seen >= rank {
			ms := bucketMid(i) / 1000
			return &ms
		}
	}
	return nil
}

// sparse is the non-empty buckets as [middle in ms, count] pairs, so that a reader can
// merge intervals into exact (to the bucket) quantiles of longer windows.
func (c *counts) sparse() [][2]float64 {
	out := [][2]float64{}
	for i, v := range c.b {
		if v > 0 {
			out = append(out, [2]float64{bucketMid(i) / 1000, float64(v)})
		}
	}
	return out
}
