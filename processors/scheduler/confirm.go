package scheduler

import (
	"hash"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
)

// confirming wraps the processor's producer so that the table store hears
// when Kafka has stored each of the table's records, deletes included
// (goka's own SetOffset follows row writes only): the store applies a
// write only then (processors/jobstore).
func confirming(build goka.ProducerBuilder, table string, confirm func(partition int32, key string, offset int64)) goka.ProducerBuilder {
	return func(brokers []string, clientID string, hasher func() hash.Hash32) (goka.Producer, error) {
		p, err := build(brokers, clientID, hasher)
		if err != nil {
			return nil, err
		}
		return &confirmingProducer{Producer: p, table: table, confirm: confirm}, nil
	}
}

type confirmingProducer struct {
	goka.Producer
	table   string
	confirm func(partition int32, key string, offset int64)
}

func (c *confirmingProducer) Emit(topic, key string, value []byte) *goka.Promise {
	return c.EmitWithHeaders(topic, key, value, nil)
}

func (c *confirmingProducer) EmitWithHeaders(topic, key string, value []byte, headers goka.Headers) *goka.Promise {
	p := c.Producer.EmitWithHeaders(topic, key, value, headers)
	if topic == c.table {
		p.ThenWithMessage(func(msg *sarama.ProducerMessage, err error) {
			if err == nil && msg != nil {
				c.confirm(msg.Partition, key, msg.Offset)
			}
		})
	}
	return p
}
