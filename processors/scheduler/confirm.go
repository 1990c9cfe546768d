package scheduler

import (
	"hash"
	"log/slog"
	"sync/atomic"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"

	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/jobstore"
)

// confirming wraps the processor's producer so that the table store hears
// when Kafka has stored the record of each of its writes, deletes
// included, by that record's own promise: the store applies a write only
// then, and stops at a write whose record failed (processors/jobstore).
func confirming(build goka.ProducerBuilder, table string, partitions *atomic.Int32, db *jobstore.DB, logger *slog.Logger) goka.ProducerBuilder {
	return func(brokers []string, clientID string, hasher func() hash.Hash32) (goka.Producer, error) {
		p, err := build(brokers, clientID, hasher)
		if err != nil {
			return nil, err
		}
		return &confirmingProducer{Producer: p, table: table, partitions: partitions, db: db, logger: logger}, nil
	}
}

type confirmingProducer struct {
	goka.Producer
	table      string
	partitions *atomic.Int32
	db         *jobstore.DB
	logger     *slog.Logger
}

func (c *confirmingProducer) Emit(topic, key string, value []byte) *goka.Promise {
	return c.EmitWithHeaders(topic, key, value, nil)
}

func (c *confirmingProducer) EmitWithHeaders(topic, key string, value []byte, headers goka.Headers) *goka.Promise {
	if topic != c.table {
		return c.Producer.EmitWithHeaders(topic, key, value, headers)
	}
	// goka wrote the storage just before, on this goroutine: the write
	// this record carries is the partition's last.
	w := c.db.Emitting(processors.PartitionOf(key, c.partitions.Load()), key)
	p := c.Producer.EmitWithHeaders(topic, key, value, headers)
	if w == nil {
		// The store then never applies the write and the partition fills
		// up: say so at once rather than when MaxHeld is reached.
		c.logger.Error("scheduler: a table record with no store write to confirm", "key", key)
		return p
	}
	return p.ThenWithMessage(func(msg *sarama.ProducerMessage, err error) {
		switch {
		case err != nil:
			w.Failed(err)
		case msg != nil:
			w.Stored(msg.Offset)
		}
	})
}
