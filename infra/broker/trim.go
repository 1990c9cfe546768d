package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/chime-sched/chime/infra/kafkaauth"
)

// Stream is a delete-policy topic the broker trims once it was consumed,
// and past its retention.
//
// Why trim: kfake keeps an index entry of every batch it holds in memory,
// so a stream kept for its retention (seven days by default) makes the
// embedded broker's memory grow with every fire for a week: a soak at
// 1,000 fires/s grew `chime dev` by about 11 MB a minute. chime's streams
// are read by chime's own consumer groups within seconds, so, as Kafka
// Streams does with its repartition topics, the broker deletes
// (DeleteRecords) what every reader has committed past. Records a reader
// has not committed are deleted only once older than the stream's
// Retention: a stopped reader keeps its backlog that long.
//
// Neither ever deletes a partition's last record: kfake rebuilds a
// partition's offsets from its segment files when it starts, and a
// partition without records comes back at offset 0, so its consumers'
// committed offsets point past the end and the records written next reuse
// offsets they had read (they skip them, or reset). Kafka keeps an empty
// partition's log end offset in its segment file names; keeping one
// record does the same here.
type Stream struct {
	Topic string
	// Readers are the groups that must all have committed on a
	// partition before any of it is deleted. Every other group that
	// committed offsets on the topic (an operator's own consumer of the
	// dead letters, say) holds the trim back too. A stream without
	// readers is trimmed by its retention only.
	Readers []string
	// Retention is how long a record is kept that a reader has not
	// consumed; 0 means DefaultRetention.
	Retention time.Duration
}

// DefaultRetention is a Stream's retention when it sets none: Kafka's
// default (retention.ms, 7 days).
const DefaultRetention = 7 * 24 * time.Hour

// kfake would apply retention itself, to every topic (the compacted tables
// included, which Kafka never expires) and down to an empty partition,
// whose offsets it forgets when it restarts. So it is told to keep
// everything (these broker configs), the per-topic settings of the Streams
// and Tables that would override them are removed
// (dropRetentionOverrides), and the trimmer applies each Stream's
// retention instead. Other topics (a test's, an operator's) keep theirs.
var retentionConfigs = []string{"retention.ms", "retention.bytes"}

// trimTimeout bounds one trimming pass.
const trimTimeout = 10 * time.Second

// trimmer deletes the consumed or expired prefix of Streams.
type trimmer struct {
	adm     *kadm.Client
	cl      *kgo.Client
	streams []Stream
	// managed are the topics whose retention is the broker's: the
	// streams and the tables.
	managed []string
	logf    func(format string, args ...any)
	now     func() time.Time
}

func newTrimmer(addrs []string, cred kafkaauth.Credential, streams []Stream, tables []string, logf func(string, ...any)) (*trimmer, error) {
	cl, err := kgo.NewClient(append(cred.Kgo(), kgo.SeedBrokers(addrs...), kgo.ClientID("chime-broker-trim"))...)
	if err != nil {
		return nil, fmt.Errorf("broker: trimming client: %w", err)
	}
	managed := slices.Clone(tables)
	for _, s := range streams {
		managed = append(managed, s.Topic)
	}
	return &trimmer{adm: kadm.NewClient(cl), cl: cl, streams: streams, managed: managed, logf: logf, now: time.Now}, nil
}

func (t *trimmer) close() { t.cl.Close() }

// dropRetentionOverrides removes retention.ms and retention.bytes set on
// the managed topics, so that kfake, which runs with both off, never
// applies them (see retentionConfigs). The pass that compacts calls it
// first: kfake's compaction applies retention too.
func (t *trimmer) dropRetentionOverrides(ctx context.Context) error {
	if len(t.managed) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, trimTimeout)
	defer cancel()
	configs, err := t.adm.DescribeTopicConfigs(ctx, t.managed...)
	if err != nil {
		return fmt.Errorf("describing topic configs: %w", err)
	}
	var errs []error
	for _, rc := range configs {
		if errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
			continue // not created yet
		}
		if rc.Err != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", rc.Name, rc.Err))
			continue
		}
		var drop []kadm.AlterConfig
		for _, c := range rc.Configs {
			if c.Source == kmsg.ConfigSourceDynamicTopicConfig && slices.Contains(retentionConfigs, c.Key) {
				drop = append(drop, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: c.Key})
			}
		}
		if len(drop) == 0 {
			continue
		}
		resp, err := t.adm.AlterTopicConfigs(ctx, drop, rc.Name)
		if err == nil {
			var r kadm.AlterConfigsResponse
			if r, err = resp.On(rc.Name, nil); err == nil {
				err = r.Err
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("topic %s: removing its retention settings: %w", rc.Name, err))
			continue
		}
		t.logf("broker: removed the retention settings of topic %s: the embedded broker applies the retention chime declares itself, and never empties a partition", rc.Name)
	}
	return errors.Join(errs...)
}

// trim runs one pass: for each partition of each stream, the lowest offset
// committed by any group that committed on it, provided every reader did,
// or the first offset within the stream's retention, whichever is higher,
// and at most the partition's last offset; the records below it are
// deleted. It returns how many records it deleted.
func (t *trimmer) trim(ctx context.Context) (int64, error) {
	if len(t.streams) == 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, trimTimeout)
	defer cancel()
	listed, err := t.adm.ListGroups(ctx)
	if err != nil {
		return 0, fmt.Errorf("listing groups: %w", err)
	}
	fetched := t.adm.FetchManyOffsets(ctx, listed.Groups()...)
	if err := fetched.Error(); err != nil {
		return 0, fmt.Errorf("fetching committed offsets: %w", err)
	}
	names := make([]string, len(t.streams))
	for i, s := range t.streams {
		names[i] = s.Topic
	}
	starts, err := t.adm.ListStartOffsets(ctx, names...)
	if err != nil {
		return 0, fmt.Errorf("listing start offsets: %w", err)
	}
	ends, err := t.adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return 0, fmt.Errorf("listing end offsets: %w", err)
	}
	expired, err := t.expired(ctx)
	if err != nil {
		return 0, err
	}
	del := make(kadm.Offsets)
	var n int64
	starts.Each(func(start kadm.ListedOffset) {
		if start.Err != nil {
			return
		}
		end, ok := ends.Lookup(start.Topic, start.Partition)
		if !ok || end.Err != nil {
			return
		}
		to, _ := t.consumed(fetched, start.Topic, start.Partition)
		if e, ok := expired.Lookup(start.Topic, start.Partition); ok {
			to = max(to, e.At)
		}
		// The last record stays (see Stream). This also keeps a committed
		// offset past the end (the tail lost in a crash) from deleting
		// what is written next.
		to = min(to, end.Offset-1)
		if to <= start.Offset {
			return
		}
		del.Add(kadm.Offset{Topic: start.Topic, Partition: start.Partition, At: to})
		n += to - start.Offset
	})
	if len(del) == 0 {
		return 0, nil
	}
	resp, err := t.adm.DeleteRecords(ctx, del)
	if err != nil {
		return 0, fmt.Errorf("deleting consumed records: %w", err)
	}
	if err := resp.Error(); err != nil {
		return 0, fmt.Errorf("deleting consumed records: %w", err)
	}
	return n, nil
}

// expired is, per partition of the streams, the first offset within the
// stream's retention (the end offset when every record is older).
func (t *trimmer) expired(ctx context.Context) (kadm.Offsets, error) {
	byRetention := map[time.Duration][]string{}
	for _, s := range t.streams {
		r := s.Retention
		if r <= 0 {
			r = DefaultRetention
		}
		byRetention[r] = append(byRetention[r], s.Topic)
	}
	out := make(kadm.Offsets)
	now := t.now()
	for r, topics := range byRetention {
		listed, err := t.adm.ListOffsetsAfterMilli(ctx, now.Add(-r).UnixMilli(), topics...)
		if err != nil {
			return nil, fmt.Errorf("listing offsets within retention: %w", err)
		}
		listed.Each(func(o kadm.ListedOffset) {
			if o.Err == nil && o.Partition >= 0 {
				out.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset})
			}
		})
	}
	return out, nil
}

// consumed is the offset below which every group that committed on the
// partition has consumed it; false when a reader has not committed, or the
// stream has no readers.
func (t *trimmer) consumed(fetched kadm.FetchOffsetsResponses, topic string, partition int32) (int64, bool) {
	var readers []string
	for _, s := range t.streams {
		if s.Topic == topic {
			readers = s.Readers
		}
	}
	if len(readers) == 0 {
		return 0, false
	}
	low, seen := int64(-1), map[string]bool{}
	for group, r := range fetched {
		o, ok := r.Fetched.Lookup(topic, partition)
		if !ok || o.Err != nil || o.At < 0 {
			continue
		}
		seen[group] = true
		if low < 0 || o.At < low {
			low = o.At
		}
	}
	for _, g := range readers {
		if !seen[g] {
			return 0, false
		}
	}
	return low, low >= 0
}
