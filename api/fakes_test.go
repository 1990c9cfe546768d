package api_test

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/chime-sched/chime/processors/namespaces"
	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// fakeJobs records the job commands published.
type fakeJobs struct {
	mu   sync.Mutex
	cmds []*chimev1.JobCommand
	err  error
}

func (f *fakeJobs) Publish(_ context.Context, cmd *chimev1.JobCommand) (producer.Receipt, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return producer.Receipt{}, f.err
	}
	f.cmds = append(f.cmds, proto.Clone(cmd).(*chimev1.JobCommand))
	return producer.Receipt{CommandID: cmd.GetCommandId()}, nil
}

func (f *fakeJobs) PublishAsync(ctx context.Context, cmd *chimev1.JobCommand, done func(producer.Receipt, error)) {
	go done(f.Publish(ctx, cmd))
}

func (f *fakeJobs) commands() []*chimev1.JobCommand {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*chimev1.JobCommand(nil), f.cmds...)
}

// fakeNamespaces is the namespace table; fakeControl applies namespace
// commands to it with the processor's own decision function.
type fakeNamespaces struct {
	mu   sync.Mutex
	rows map[string]*chimev1.NamespaceConfig
}

func (f *fakeNamespaces) Get(ns string) (*chimev1.NamespaceConfig, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.rows[ns]; ok {
		return proto.Clone(r).(*chimev1.NamespaceConfig), nil
	}
	return nil, nil
}

type fakeControl struct {
	ns *fakeNamespaces
	// hold keeps namespace commands from reaching the table (a slow view).
	hold     bool
	mu       sync.Mutex
	breakers []*chimev1.BreakerCommand
}

func (f *fakeControl) PublishNamespace(_ context.Context, cmd *chimev1.NamespaceCommand) error {
	if f.hold {
		return nil
	}
	raw, err := proto.Marshal(cmd)
	if err != nil {
		return err
	}
	f.ns.mu.Lock()
	defer f.ns.mu.Unlock()
	next, rej := namespaces.Apply(cmd.GetNamespace(), f.ns.rows[cmd.GetNamespace()], raw, time.Now())
	if rej != nil {
		return errors.New(rej.GetReason())
	}
	if next != nil {
		f.ns.rows[cmd.GetNamespace()] = next
	}
	return nil
}

func (f *fakeControl) PublishBreaker(_ context.Context, cmd *chimev1.BreakerCommand) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.breakers = append(f.breakers, cmd)
	return nil
}

type fakeBreakers map[string]*chimev1.BreakerStatus

func (f fakeBreakers) Get(ns string) *chimev1.BreakerStatus {
	if st, ok := f[ns]; ok {
		return st
	}
	return &chimev1.BreakerStatus{Namespace: ns, State: chimev1.BreakerState_BREAKER_STATE_CLOSED}
}

type fakeJobStates struct {
	mu   sync.Mutex
	rows map[string]*chimev1.JobState
}

func (f *fakeJobStates) Get(ns, id string) (*chimev1.JobState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rows[schema.JobKey(ns, id)], nil
}

func (f *fakeJobStates) put(ns, id string, st *chimev1.JobState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rows[schema.JobKey(ns, id)] = st
}
