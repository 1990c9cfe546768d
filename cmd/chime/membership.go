package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/chime-sched/chime/infra/config"
	"github.com/chime-sched/chime/infra/dirlock"
	"github.com/chime-sched/chime/infra/groups"
	"github.com/chime-sched/chime/internal/lifecycle"
)

// identityLockName is the lock file in the state dir that makes a derived
// instance ID unique: only the process holding it uses the ID.
const identityLockName = "instance.lock"

// chimeGroups are the consumer groups of every role.
func chimeGroups(cfg config.Config) []string {
	t := cfg.Topics()
	return []string{t.SchedulerGroup(), t.DispatcherGroup(), t.BreakerGroup(), t.NamespaceGroup(), t.SinkGroup()}
}

// joinIdentity decides the process's group membership: the configured
// instance ID, or one derived from the host and the state dir while this
// process holds the state dir's identity lock. When another process holds
// it (two roles started from one directory), this one runs as a dynamic
// member: correct, only without the fast restart. release drops the lock.
func (e *env) joinIdentity() (release func()) {
	e.membership = groups.Membership{InstanceID: e.cfg.InstanceID, SessionTimeout: e.cfg.SessionTimeout, EmbeddedBroker: e.cfg.Embedded()}
	if e.membership.InstanceID != "" {
		return func() {}
	}
	abs, err := filepath.Abs(e.cfg.StateDir)
	if err != nil {
		e.log.Warn("no static group membership: state dir", "err", err)
		return func() {}
	}
	lock, err := dirlock.Acquire(abs, identityLockName, "state dir identity")
	if err != nil {
		e.log.Warn("no static group membership: another process uses this state dir; give each process its own --state-dir or --instance-id for fast restarts", "err", err)
		return func() {}
	}
	host, err := os.Hostname()
	if err != nil {
		host = "host"
	}
	e.membership.InstanceID = groups.DeriveInstanceID(e.cfg.ClientID, host, abs)
	return func() { _ = lock.Release() }
}

// leaveGroups hands this process's partitions over at once on a clean
// stop: static members do not leave when their clients close.
func (e *env) leaveGroups() {
	if e.membership.InstanceID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(append(e.sasl.Kgo(), kgo.SeedBrokers(e.brokers...), kgo.ClientID(e.cfg.ClientID+"-admin"))...)
	if err != nil {
		e.log.Warn("leaving consumer groups", "err", err)
		return
	}
	defer cl.Close()
	if err := groups.Leave(ctx, cl, e.membership.InstanceID, chimeGroups(e.cfg)...); err != nil {
		e.log.Warn("leaving consumer groups; the partitions move after the session timeout", "err", fmt.Sprint(err), "session_timeout", e.membership.SessionTimeout)
	}
}

// leaveOnSignal is the part that hands this process's partitions over at
// once (leaveGroups) when the process stops on a signal (signal, runRole's
// context, ended). Added to the group before the role's parts, it stops
// after every consumer of the process has closed, and before the embedded
// broker goes.
func (e *env) leaveOnSignal(signal context.Context) lifecycle.Part {
	return lifecycle.Func("group membership", func(ctx context.Context, ready func()) error {
		ready()
		<-ctx.Done()
		if signal.Err() != nil {
			e.leaveGroups()
		}
		return nil
	})
}
