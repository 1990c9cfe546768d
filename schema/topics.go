package schema

import (
	"strings"
	"time"
)

// DefaultPrefix is put in front of every topic and group name so that
// several chime installations can share one Kafka cluster.
const DefaultPrefix = "chime."

// Cleanup policies a topic is provisioned with.
const (
	CleanupDelete  = "delete"
	CleanupCompact = "compact"
)

// Topics is the one place topic and consumer-group names are derived.
type Topics struct {
	Prefix string
}

// NewTopics returns the names under prefix ("" means DefaultPrefix).
func NewTopics(prefix string) Topics {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return Topics{Prefix: prefix}
}

// JobCommands is the scheduler's command input, keyed "namespace/job_id".
func (t Topics) JobCommands() string { return t.Prefix + "job-commands" }

// SchedulerGroup is the scheduler processor's goka group.
func (t Topics) SchedulerGroup() string { return t.Prefix + "scheduler" }

// SchedulerTable is goka's table topic for SchedulerGroup.
func (t Topics) SchedulerTable() string { return t.SchedulerGroup() + "-table" }

// Due carries fires to the dispatchers, keyed by namespace (a spread
// namespace's shards by "ns#k" keys: schema/spread.go).
func (t Topics) Due() string { return t.Prefix + "due" }

// DispatcherGroup is the dispatchers' consumer group of Due.
func (t Topics) DispatcherGroup() string { return t.Prefix + "dispatcher" }

// SinkGroup is the analytics sink's consumer group.
func (t Topics) SinkGroup() string { return t.Prefix + "analytics-sink" }

// Outcomes carries callback outcomes, keyed by namespace.
func (t Topics) Outcomes() string { return t.Prefix + "outcomes" }

// DeadLetters holds fires that will not be retried.
func (t Topics) DeadLetters() string { return t.Prefix + "dead-letters" }

// Rejections explains commands that were not applied.
func (t Topics) Rejections() string { return t.Prefix + "rejections" }

// JobEvents is the job lifecycle stream, keyed by namespace.
func (t Topics) JobEvents() string { return t.Prefix + "job-events" }

// BreakerGroup is the breaker processor's goka group.
func (t Topics) BreakerGroup() string { return t.Prefix + "breaker" }

// BreakerTable is goka's table topic for BreakerGroup.
func (t Topics) BreakerTable() string { return t.BreakerGroup() + "-table" }

// BreakerTransitions records every breaker state change.
func (t Topics) BreakerTransitions() string { return t.Prefix + "breaker-transitions" }

// BreakerTimers receives the breaker's cool-off timers (Kafka-target jobs).
func (t Topics) BreakerTimers() string { return t.Prefix + "breaker-timers" }

// BreakerCommands carries operators' manual breaker controls (force open,
// force closed, automatic, reset), keyed by namespace.
func (t Topics) BreakerCommands() string { return t.Prefix + "breaker-commands" }

// NamespaceCommands is the namespace-config processor's input.
func (t Topics) NamespaceCommands() string { return t.Prefix + "namespace-commands" }

// NamespaceGroup is the namespace-config processor's goka group.
func (t Topics) NamespaceGroup() string { return t.Prefix + "namespaces" }

// NamespaceTable is goka's table topic for NamespaceGroup.
func (t Topics) NamespaceTable() string { return t.NamespaceGroup() + "-table" }

// Spec describes how a topic must be provisioned.
type Spec struct {
	Name    string
	Cleanup string
	// CoPartitioned topics must all have the configured partition count:
	// each is an input, table or lookup of a goka group (scheduler,
	// breaker, namespaces), and goka enforces co-partitioning.
	CoPartitioned bool
	// Retention, if set, is the topic's retention.ms; 0 leaves the
	// broker's (Kafka's default is 7 days: a stopped consumer group has a
	// week to come back before its input is gone). The embedded broker
	// applies it itself (infra/broker's Stream).
	Retention time.Duration
	// Readers are chime's consumer groups of a stream. The embedded
	// broker deletes a stream's records once every reader (and every
	// other group that committed offsets on it) has consumed them
	// (infra/broker, trim.go); a stream without readers keeps its
	// retention.
	Readers []string
}

// All lists every topic chime needs, with its cleanup policy. Tables are
// compacted; streams are deleted by retention.
func (t Topics) All() []Spec {
	sched, disp, brk, ns, sink := t.SchedulerGroup(), t.DispatcherGroup(), t.BreakerGroup(), t.NamespaceGroup(), t.SinkGroup()
	return []Spec{
		{Name: t.JobCommands(), Cleanup: CleanupDelete, CoPartitioned: true, Readers: []string{sched}},
		{Name: t.SchedulerTable(), Cleanup: CleanupCompact, CoPartitioned: true},
		{Name: t.Due(), Cleanup: CleanupDelete, Readers: []string{disp}},
		{Name: t.Outcomes(), Cleanup: CleanupDelete, CoPartitioned: true, Readers: []string{brk, sink}},
		{Name: t.DeadLetters(), Cleanup: CleanupDelete, Readers: []string{sink}},
		{Name: t.Rejections(), Cleanup: CleanupDelete},
		{Name: t.JobEvents(), Cleanup: CleanupDelete, Readers: []string{sink}},
		{Name: t.BreakerTable(), Cleanup: CleanupCompact, CoPartitioned: true},
		{Name: t.BreakerTransitions(), Cleanup: CleanupDelete, Readers: []string{sink}},
		{Name: t.BreakerTimers(), Cleanup: CleanupDelete, CoPartitioned: true, Readers: []string{brk}},
		{Name: t.BreakerCommands(), Cleanup: CleanupDelete, CoPartitioned: true, Readers: []string{brk}},
		{Name: t.NamespaceCommands(), Cleanup: CleanupDelete, CoPartitioned: true, Readers: []string{ns}},
		{Name: t.NamespaceTable(), Cleanup: CleanupCompact, CoPartitioned: true},
	}
}

// JobKey is the key of a job's commands and table row.
func JobKey(namespace, jobID string) string { return namespace + "/" + jobID }

// IsJobKey says whether key is JobKey(namespace, jobID), without building
// it (the scheduler checks every command's key).
func IsJobKey(key, namespace, jobID string) bool {
	n := len(namespace)
	return len(key) == n+1+len(jobID) && key[n] == '/' && key[:n] == namespace && key[n+1:] == jobID
}

// SplitJobKey undoes JobKey. Namespaces never contain '/', job IDs may not
// either, so the first slash separates them.
func SplitJobKey(key string) (namespace, jobID string, ok bool) {
	i := strings.IndexByte(key, '/')
	if i <= 0 || i == len(key)-1 {
		return "", "", false
	}
	return key[:i], key[i+1:], true
}

// IdleFetchWait is how long chime's consumers let the broker hold a fetch
// while no record arrives. A fetch is answered as soon as one does, so this
// sets how often an idle consumer asks again, not the latency: a dozen
// consumers polling every 50 ms cost an idle chime dev 3% of a core, every
// 2 s a third of a percent. It is not longer because goka's table recovery
// waits a fetch out at the end of a partition: 5 s doubled the time to
// recover two million jobs.
const IdleFetchWait = 2 * time.Second

// BatchedFetchBytes is what the consumers whose records may wait (the
// scheduler's commands, the breaker's and the analytics sink's inputs)
// let the broker gather before it answers a fetch, each within a wait of
// its own (docs/architecture.md, "Fetches"): a fetch per few records was
// a large share of their CPU per job at a steady rate.
const BatchedFetchBytes = 64 << 10
