package scheduler

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chime-sched/chime/processors/jobstore"
)

// storeCollector reports the table store's Pebble work
// (jobstore.Stats): what saturates once rows are read from disk
// (docs/operations.md). A scrape reads the store's metrics once for all
// of them. It reads the scheduler's store when scraped: the metrics are
// registered before the store is open.
type storeCollector struct{ s *Scheduler }

// storeMetrics are the counters storeCollector reports, each from one
// field of jobstore.Stats.
var storeMetrics = []struct {
	desc  *prometheus.Desc
	value func(jobstore.Stats) float64
}{
	{prometheus.NewDesc("chime_scheduler_store_flushed_bytes_total",
		"Bytes the table store's Pebble memtable flushes wrote to disk since the process started: the rows and index entries that outlived the write cache.", nil, nil),
		func(st jobstore.Stats) float64 { return float64(st.FlushedBytes) }},
	{prometheus.NewDesc("chime_scheduler_store_compacted_bytes_total",
		"Bytes the table store's Pebble compactions rewrote since the process started: over the flushed bytes, its write amplification, CPU that grows with the rows kept on disk.", nil, nil),
		func(st jobstore.Stats) float64 { return float64(st.CompactedBytes) }},
	{prometheus.NewDesc("chime_scheduler_store_compactions_total",
		"Compactions of the table store's Pebble database since the process started.", nil, nil),
		func(st jobstore.Stats) float64 { return float64(st.Compactions) }},
	{prometheus.NewDesc("chime_scheduler_store_cache_misses_total",
		"Block cache lookups of the table store that read a block from its files (a row read from disk), since the process started.", nil, nil),
		func(st jobstore.Stats) float64 { return float64(st.CacheMisses) }},
	{prometheus.NewDesc("chime_scheduler_store_cache_hits_total",
		"Block cache lookups of the table store answered from memory, since the process started.", nil, nil),
		func(st jobstore.Stats) float64 { return float64(st.CacheHits) }},
}

func (c storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range storeMetrics {
		ch <- m.desc
	}
}

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.db.Stats()
	for _, m := range storeMetrics {
		ch <- prometheus.MustNewConstMetric(m.desc, prometheus.CounterValue, m.value(st))
	}
}
