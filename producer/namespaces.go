package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/chime-sched/chime/schema/chimev1"
)

// ErrUnknownNamespace is wrapped by the error of a job refused because
// chime does not know its namespace ([CheckNamespaces]). Nothing was
// published.
var ErrUnknownNamespace = errors.New("chime has no such namespace")

// namespaceCheck answers whether chime knows a namespace by reading its
// row in the namespace table: the one partition goka keeps the key in, up
// to the end it has when asked. Found namespaces are remembered; chime
// never deletes one.
type namespaceCheck struct {
	topic string
	// opts connect a reading client as the producer's connects.
	opts []kgo.Opt

	mu    sync.Mutex
	known map[string]bool
}

func newNamespaceCheck(topic string, opts []kgo.Opt) *namespaceCheck {
	return &namespaceCheck{topic: topic, opts: opts, known: map[string]bool{}}
}

// checkNamespace refuses an Upsert whose namespace chime does not know,
// with CheckNamespaces; other commands, and every command without it,
// pass.
func (p *Producer) checkNamespace(ctx context.Context, cmd *chimev1.JobCommand) error {
	if p.namespaces == nil {
		return nil
	}
	if b := cmd.GetBatch(); b != nil {
		for _, sub := range b.GetCommands() {
			if err := p.checkNamespace(ctx, sub); err != nil {
				return err
			}
		}
		return nil
	}
	if cmd.GetUpsert() == nil {
		return nil
	}
	ns := cmd.GetNamespace()
	ok, err := p.namespaces.exists(ctx, p, ns)
	switch {
	case err != nil:
		return fmt.Errorf("producer: checking that namespace %q exists (CheckNamespaces): %w", ns, err)
	case !ok:
		return fmt.Errorf("producer: namespace %q: %w: create it first (PUT /v1/namespaces/%s over the API, with the admin token); nothing was published",
			ns, ErrUnknownNamespace, ns)
	}
	return nil
}

func (n *namespaceCheck) exists(ctx context.Context, p *Producer, ns string) (bool, error) {
	n.mu.Lock()
	known := n.known[ns]
	n.mu.Unlock()
	if known {
		return true, nil
	}
	found, err := n.read(ctx, p, ns)
	if found {
		n.mu.Lock()
		n.known[ns] = true
		n.mu.Unlock()
	}
	return found, err
}

// read looks for ns in its partition of the table, from the start to the
// end offset the partition has now.
func (n *namespaceCheck) read(ctx context.Context, p *Producer, ns string) (bool, error) {
	rctx, release := p.dials.bind(ctx)
	defer release()
	fail := func(err error) (bool, error) {
		if u := unreachable(rctx); u != nil {
			return false, u
		}
		if u := p.dials.refusal(err); u != nil {
			return false, u
		}
		return false, err
	}
	ends, err := kadm.NewClient(p.cl).ListEndOffsets(rctx, n.topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fail(fmt.Errorf("the end of %s: %w", n.topic, err))
	}
	partitions := len(ends[n.topic])
	if partitions == 0 {
		return false, fmt.Errorf("topic %s has no partitions: is chime provisioned under this topic prefix?", n.topic)
	}
	partition := int32(kgo.SaramaCompatHasher(fnv32a)([]byte(ns), partitions))
	end, _ := ends.Lookup(n.topic, partition)
	if end.Offset <= 0 {
		return false, nil
	}
	cl, err := kgo.NewClient(append(n.opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		n.topic: {partition: kgo.NewOffset().AtStart()},
	}))...)
	if err != nil {
		return false, err
	}
	defer cl.Close()
	found := false
	for next := int64(0); next < end.Offset; {
		fetches := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			return fail(rctx.Err())
		}
		if err := fetches.Err0(); err != nil {
			return fail(fmt.Errorf("reading %s: %w", n.topic, err))
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if string(r.Key) == ns {
				found = len(r.Value) > 0 // a tombstone deletes
			}
			next = r.Offset + 1
		})
	}
	return found, nil
}
