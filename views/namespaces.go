// Package views owns chime's read models: typed goka views of the
// processors' tables, for the API and the dispatchers.
package views

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/lovoo/goka"

	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/memstore"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// Namespaces is a view of the namespace-config table.
type Namespaces struct {
	view *goka.View
}

// NewNamespaces builds the view; Run must be running for Get to answer.
func NewNamespaces(brokers []string, topics schema.Topics, clientID string, replication int, logger *slog.Logger) (*Namespaces, error) {
	if logger == nil {
		logger = slog.Default()
	}
	opts := append(processors.ViewOptions(clientID, replication, logger), goka.WithViewStorageBuilder(memstore.Builder()))
	v, err := goka.NewView(brokers, goka.GroupTable(goka.Group(topics.NamespaceGroup())), new(schema.NamespaceConfigCodec), opts...)
	if err != nil {
		return nil, fmt.Errorf("namespaces view: %w", err)
	}
	return &Namespaces{view: v}, nil
}

// Run keeps the view up to date until ctx is done.
func (n *Namespaces) Run(ctx context.Context) error { return n.view.Run(ctx) }

// Recovered reports whether the view has caught up with the table.
func (n *Namespaces) Recovered() bool { return n.view.Recovered() }

// WaitReady blocks until the view has caught up.
func (n *Namespaces) WaitReady(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !n.view.Recovered() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// Get returns the namespace's stored configuration, nil if it has none.
func (n *Namespaces) Get(ns string) (*chimev1.NamespaceConfig, error) {
	v, err := n.view.Get(ns)
	if err != nil || v == nil {
		return nil, err
	}
	return v.(*chimev1.NamespaceConfig), nil
}

// Effective returns the namespace's configuration with the defaults filled
// in; an unknown namespace gets the defaults.
func (n *Namespaces) Effective(ns string) *chimev1.NamespaceConfig {
	cfg, _ := n.Get(ns)
	return schema.EffectiveNamespace(ns, cfg)
}
