// Package views owns chime's read models: typed goka views of the
// namespace and breaker tables, which every API process and dispatcher
// keeps whole (they are small). The jobs table is not replicated: it is
// read where it lives, in the scheduler instances (views/jobquery).
package views

import (
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// Namespaces is a view of the namespace-config table; it is the
// schema.NamespaceSource the processors read.
type Namespaces struct {
	*table[*chimev1.NamespaceConfig]
}

var _ schema.NamespaceSource = (*Namespaces)(nil)

// NewNamespaces builds the view of topics' namespace-config table,
// connected as c says (c.ClientID defaults to "chime-namespaces-view"); it
// answers Get once started (lifecycle.Part) and caught up.
func NewNamespaces(c processors.Client, topics schema.Topics) (*Namespaces, error) {
	t, err := newTable[*chimev1.NamespaceConfig]("namespaces view", "chime-namespaces-view", topics.NamespaceGroup(), new(schema.NamespaceConfigCodec), c)
	if err != nil {
		return nil, err
	}
	return &Namespaces{t}, nil
}

// Get returns the namespace's stored configuration, nil if it has none.
func (n *Namespaces) Get(ns string) (*chimev1.NamespaceConfig, error) {
	cfg, _, err := n.get(ns)
	return cfg, err
}

// Names returns every namespace with a stored configuration, sorted.
func (n *Namespaces) Names() ([]string, error) { return n.keys() }

// Effective returns the namespace's configuration with the defaults filled
// in; an unknown namespace gets the defaults.
func (n *Namespaces) Effective(ns string) *chimev1.NamespaceConfig {
	cfg, _ := n.Get(ns)
	return schema.EffectiveNamespace(ns, cfg)
}
