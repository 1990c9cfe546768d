package scheduler

import (
	"sync"

	"github.com/IBM/sarama"

	"github.com/chime-sched/chime/processors/jobstore"
)

// commitGate holds the scheduler's command offsets back from the commit
// until the rows the commands wrote are in Kafka. The table store keeps
// rows in its write cache, not in Kafka, for up to MaxHold
// (processors/jobstore, overlay.go); goka marks a command's offset once
// the records it emitted are stored, which says nothing of its rows. So
// the gate sits between goka and sarama's session: it forwards each mark
// capped at the partition's Hold (the lowest offset whose rows are not
// stored yet), and forwards again when the store says its Hold rose. A
// kill -9 then replays the commands whose rows were lost with the cache,
// as Kafka Streams replays what came after its last commit.
type commitGate struct {
	db    *jobstore.DB
	topic string

	mu     sync.Mutex
	sess   sarama.ConsumerGroupSession
	marked map[int32]int64
}

func newCommitGate(db *jobstore.DB, topic string) *commitGate {
	return &commitGate{db: db, topic: topic, marked: map[int32]int64{}}
}

// wrap gates a consumer group handler (processors.BatchedGroupBuilder).
func (g *commitGate) wrap(h sarama.ConsumerGroupHandler) sarama.ConsumerGroupHandler {
	return gatedHandler{ConsumerGroupHandler: h, g: g}
}

type gatedHandler struct {
	sarama.ConsumerGroupHandler
	g *commitGate
}

func (h gatedHandler) Setup(s sarama.ConsumerGroupSession) error {
	h.g.mu.Lock()
	h.g.sess, h.g.marked = s, map[int32]int64{}
	h.g.mu.Unlock()
	return h.ConsumerGroupHandler.Setup(gatedSession{ConsumerGroupSession: s, g: h.g})
}

func (h gatedHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	return h.ConsumerGroupHandler.ConsumeClaim(gatedSession{ConsumerGroupSession: s, g: h.g}, c)
}

// Cleanup: goka stops the partitions, whose storages store their rows as
// they close and release what they held; sarama commits after it.
func (h gatedHandler) Cleanup(s sarama.ConsumerGroupSession) error {
	err := h.ConsumerGroupHandler.Cleanup(gatedSession{ConsumerGroupSession: s, g: h.g})
	h.g.mu.Lock()
	if h.g.sess == s {
		h.g.sess = nil
	}
	h.g.mu.Unlock()
	return err
}

type gatedSession struct {
	sarama.ConsumerGroupSession
	g *commitGate
}

func (s gatedSession) MarkOffset(topic string, p int32, offset int64, metadata string) {
	if topic != s.g.topic {
		s.ConsumerGroupSession.MarkOffset(topic, p, offset, metadata)
		return
	}
	s.g.mu.Lock()
	if offset > s.g.marked[p] {
		s.g.marked[p] = offset
	}
	s.g.mu.Unlock()
	s.g.forward(s.ConsumerGroupSession, p)
}

func (s gatedSession) MarkMessage(msg *sarama.ConsumerMessage, metadata string) {
	s.MarkOffset(msg.Topic, msg.Partition, msg.Offset+1, metadata)
}

// forward marks partition p's offset in sess, capped at what its rows
// allow. Nothing is marked while no storage of p is open: a late mark
// after the partition closed is read again by its next owner.
func (g *commitGate) forward(sess sarama.ConsumerGroupSession, p int32) {
	g.mu.Lock()
	off, ok := g.marked[p]
	g.mu.Unlock()
	if !ok {
		return
	}
	hold, open := g.db.Hold(p)
	if !open {
		return
	}
	if hold >= 0 && hold < off {
		off = hold
	}
	sess.MarkOffset(g.topic, p, off, "")
}

// durable is the store's word that partition p's Hold rose.
func (g *commitGate) durable(p int32) {
	g.mu.Lock()
	sess := g.sess
	g.mu.Unlock()
	if sess != nil {
		g.forward(sess, p)
	}
}
