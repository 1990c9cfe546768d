package schema

import "github.com/chime-sched/chime/schema/chimev1"

// NamespaceSource reads stored namespace configurations (nil: the namespace
// set nothing); views.Namespaces, a view of the namespace-config table, is
// one. It is declared here, beside the configuration's defaults, so that
// the processors that read it (scheduler, breaker) need not import the
// views, which come after them. Processors take it instead of a goka lookup
// table: goka closes a processor's lookup views while its callbacks may
// still read them (a data race inside goka at shutdown), while a view run
// beside the processor is started before it and stopped after it
// (lifecycle.Group).
type NamespaceSource interface {
	Get(ns string) (*chimev1.NamespaceConfig, error)
}

// StaticNamespaces is a fixed NamespaceSource (tests, tools): read-only
// once in use.
type StaticNamespaces map[string]*chimev1.NamespaceConfig

// Get implements NamespaceSource.
func (m StaticNamespaces) Get(ns string) (*chimev1.NamespaceConfig, error) { return m[ns], nil }
