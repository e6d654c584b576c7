package main

import (
	"sync"
	"time"
)

// reporter turns the counters into one "second" line per interval and keeps the
// totals for the "final" line.
type reporter struct {
	s         *stats
	producers []*producer
	start     time.Time
	out       *emitter

	mu                              sync.Mutex
	last                            time.Time
	lastCPU                         float64
	offered, produced, shed, errors int64
	consumed                        []int64
	produceAll, e2eAll              counts
}

func newReporter(s *stats, producers []*producer, start time.Time, out *emitter) *reporter {
	return &reporter{
		s: s, producers: producers, start: start, out: out,
		last: start, lastCPU: cpuSeconds(), consumed: make([]int64, len(s.consumed)),
	}
}

func (r *reporter) loop(every time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			r.second(time.Now(), false)
			return
		case now := <-t.C:
			r.second(now, false)
		}
	}
}

func ms(p *float64) any {
	if p == nil {
		return nil
	}
	return float64(int64(*p*1000+0.5)) / 1000
}

// second writes the line of the interval that ends now (none when it counted nothing
// and skipEmpty is set).
func (r *reporter) second(now time.Time, skipEmpty bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	offered := r.s.offered.Swap(0)
	produced := r.s.produced.Swap(0)
	shed := r.s.shed.Swap(0)
	errs := r.s.errors.Swap(0)
	per := make([]int64, len(r.s.consumed))
	var consumed int64
	for i := range r.s.consumed {
		per[i] = r.s.consumed[i].Swap(0)
		consumed += per[i]
		r.consumed[i] += per[i]
	}
	pl, el := r.s.produceLat.take(), r.s.e2eLat.take()
	if skipEmpty && offered == 0 && produced == 0 && shed == 0 && errs == 0 && consumed == 0 {
		return
	}
	r.produceAll.merge(pl)
	r.e2eAll.merge(el)
	r.offered += offered
	r.produced += produced
	r.shed += shed
	r.errors += errs
	var buffered int64
	for _, p := range r.producers {
		buffered += p.cl.BufferedProduceRecords()
	}
	cpu := cpuSeconds()
	line := map[string]any{
		"type":           "second",
		"t":              round3(now.Sub(r.start).Seconds()),
		"time":           round3(unixSeconds(now)),
		"dt":             round3(now.Sub(r.last).Seconds()),
		"offered":        offered,
		"produced":       produced,
		"consumed":       consumed,
		"shed":           shed,
		"errors":         errs,
		"buffered":       buffered,
		"produce_p50_ms": ms(pl.quantileMs(0.50)),
		"produce_p99_ms": ms(pl.quantileMs(0.99)),
		"e2e_p50_ms":     ms(el.quantileMs(0.50)),
		"e2e_p99_ms":     ms(el.quantileMs(0.99)),
		"consumers":      per,
		"cpu_s":          round3(cpu - r.lastCPU),
		"produce_hist":   pl.sparse(),
		"e2e_hist":       el.sparse(),
	}
	if errs > 0 {
		if e, ok := r.s.lastErr.Load().(string); ok {
			line["last_error"] = e
		}
	}
	r.last, r.lastCPU = now, cpu
	r.out.line(line)
}

func (r *reporter) producedSoFar() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.produced
}

func (r *reporter) consumedSoFar() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for _, v := range r.consumed {
		n += v
	}
	return n
}

// final writes the totals; rates are over the offering time (start to stop).
func (r *reporter) final(stopped time.Time) {
	r.second(time.Now(), true) // anything counted after the last line
	r.mu.Lock()
	defer r.mu.Unlock()
	secs := stopped.Sub(r.start).Seconds()
	var consumed int64
	for _, v := range r.consumed {
		consumed += v
	}
	rate := func(n int64) any {
		if secs <= 0 {
			return nil
		}
		return round3(float64(n) / secs)
	}
	r.out.line(map[string]any{
		"type":           "final",
		"duration_s":     round3(secs),
		"offered":        r.offered,
		"produced":       r.produced,
		"consumed":       consumed,
		"shed":           r.shed,
		"errors":         r.errors,
		"offered_rate":   rate(r.offered),
		"produced_rate":  rate(r.produced),
		"consumed_rate":  rate(consumed),
		"produce_p50_ms": ms(r.produceAll.quantileMs(0.50)),
		"produce_p99_ms": ms(r.produceAll.quantileMs(0.99)),
		"e2e_p50_ms":     ms(r.e2eAll.quantileMs(0.50)),
		"e2e_p99_ms":     ms(r.e2eAll.quantileMs(0.99)),
		"consumers":      r.consumed,
		"cpu_s":          round3(cpuSeconds()),
	})
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }
