// Package views owns chime's read models: typed goka views of the
// processors' tables, for the API and the dispatchers.
package views

import (
	"log/slog"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// Namespaces is a view of the namespace-config table.
type Namespaces struct {
	*table[*chimev1.NamespaceConfig]
}

// NewNamespaces builds the view; Run must be running for Get to answer.
func NewNamespaces(brokers []string, topics schema.Topics, clientID string, replication int, logger *slog.Logger) (*Namespaces, error) {
	t, err := newTable[*chimev1.NamespaceConfig](brokers, topics.NamespaceGroup(), new(schema.NamespaceConfigCodec), clientID, replication, logger)
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

// Effective returns the namespace's configuration with the defaults filled
// in; an unknown namespace gets the defaults.
func (n *Namespaces) Effective(ns string) *chimev1.NamespaceConfig {
	cfg, _ := n.Get(ns)
	return schema.EffectiveNamespace(ns, cfg)
}
