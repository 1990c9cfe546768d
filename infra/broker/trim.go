package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/chime-sched/chime/infra/kafkaauth"
)

// Stream is a delete-policy topic the broker trims once it was consumed.
//
// Why: kfake keeps an index entry of every batch it holds in memory, so a
// stream kept for its retention (seven days by default) makes the embedded
// broker's memory grow with every fire for a week: a soak at 1,000 fires/s
// grew `chime dev` by about 11 MB a minute. chime's streams are read by
// chime's own consumer groups within seconds, so, as Kafka Streams does
// with its repartition topics, the broker deletes (DeleteRecords) what
// every reader has committed past. Records a reader has not committed are
// never deleted: a stopped reader keeps its backlog for the topic's
// retention, as before.
type Stream struct {
	Topic string
	// Readers are the groups that must all have committed on a
	// partition before any of it is deleted. Every other group that
	// committed offsets on the topic (an operator's own consumer of the
	// dead letters, say) holds the trim back too.
	Readers []string
}

// trimTimeout bounds one trimming pass.
const trimTimeout = 10 * time.Second

// trimmer deletes the consumed prefix of Streams.
type trimmer struct {
	adm     *kadm.Client
	cl      *kgo.Client
	streams []Stream
}

func newTrimmer(addrs []string, cred kafkaauth.Credential, streams []Stream) (*trimmer, error) {
	cl, err := kgo.NewClient(append(cred.Kgo(), kgo.SeedBrokers(addrs...), kgo.ClientID("chime-broker-trim"))...)
	if err != nil {
		return nil, fmt.Errorf("broker: trimming client: %w", err)
	}
	return &trimmer{adm: kadm.NewClient(cl), cl: cl, streams: streams}, nil
}

func (t *trimmer) close() { t.cl.Close() }

// trim runs one pass: for each partition of each stream, the lowest offset
// committed by any group that committed on it, provided every reader did;
// the records below it are deleted. It returns how many records it deleted.
func (t *trimmer) trim(ctx context.Context) (int64, error) {
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
		to, ok := t.consumed(fetched, start.Topic, start.Partition)
		// A committed offset past the end (the tail lost in a crash) must
		// not delete what is written next.
		to = min(to, end.Offset)
		if !ok || to <= start.Offset {
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

// consumed is the offset below which every group that committed on the
// partition has consumed it; false when a reader has not committed.
func (t *trimmer) consumed(fetched kadm.FetchOffsetsResponses, topic string, partition int32) (int64, bool) {
	var readers []string
	for _, s := range t.streams {
		if s.Topic == topic {
			readers = s.Readers
		}
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
