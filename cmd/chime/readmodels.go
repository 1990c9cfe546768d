package main

import (
	"github.com/chime-sched/chime/internal/lifecycle"
	"github.com/chime-sched/chime/views"
)

// readModels are the views of the namespace and breaker tables that every
// role of a process reads. chime dev keeps one set for all its roles (the
// scheduler, breaker, dispatcher and API each kept their own before, so
// every table was consumed four times in one process); a role run alone
// keeps the ones it reads.
type readModels struct {
	namespaces *views.Namespaces
	breakers   *views.Breakers // nil in a role that does not read it
}

// newReadModels builds the views (breakers too, or not); the role's group
// starts them first and stops them last (parts).
func newReadModels(e *env, breakers bool) (*readModels, error) {
	t := e.cfg.Topics()
	log := e.log.With("component", "views")
	ns, err := views.NewNamespaces(e.kafkaClient("-namespaces", e.replicationOf(t.NamespaceTable()), log), t)
	if err != nil {
		return nil, err
	}
	rm := &readModels{namespaces: ns}
	if breakers {
		if rm.breakers, err = views.NewBreakers(e.kafkaClient("-breakers", e.replicationOf(t.BreakerTable()), log), t); err != nil {
			return nil, err
		}
	}
	return rm, nil
}

// parts are the views as parts of the role's group.
func (rm *readModels) parts() []lifecycle.Part {
	if rm.breakers == nil {
		return []lifecycle.Part{rm.namespaces}
	}
	return []lifecycle.Part{rm.namespaces, rm.breakers}
}
