package main

import (
	"fmt"

	"github.com/chime-sched/chime/dispatcher"
	"github.com/chime-sched/chime/infra/config"
	"github.com/chime-sched/chime/internal/lifecycle"
	"github.com/chime-sched/chime/schema/chimev1"
)

// dispatcherGuard builds the SSRF guard from the configuration: the
// allowlisted CIDRs, and loopback when allowed (unset: only in `chime dev`,
// whose callbacks usually go to a local receiver).
func dispatcherGuard(cfg config.Config, dev bool) dispatcher.Guard {
	g := dispatcher.Guard{AllowLoopback: dev, Allow: cfg.DispatcherAllowCIDRs}
	if cfg.DispatcherAllowLoopback != nil {
		g.AllowLoopback = *cfg.DispatcherAllowLoopback
	}
	return g
}

func roleDispatcher(e *env, g *lifecycle.Group) error {
	rm, err := newReadModels(e, true)
	if err != nil {
		return err
	}
	d, err := newDispatcher(e, false, rm)
	if err != nil {
		return err
	}
	g.Add(rm.parts()...).Add(d)
	return nil
}

// newDispatcher builds the dispatcher; dev allows loopback callbacks
// unless CHIME_DISPATCHER_ALLOW_LOOPBACK=false (infra/config). Namespace
// configuration (limits, retry policy, signing secret, allowed hosts) comes
// from the namespace-config table through a view, and every namespace's
// breaker state from the breaker table through another (rm); the role's
// group starts the dispatcher only once both views have caught up, so no
// callback goes out unsigned, unlimited or past an open breaker because a
// table was not read yet.
func newDispatcher(e *env, dev bool, rm *readModels) (*dispatcher.Dispatcher, error) {
	guard := dispatcherGuard(e.cfg, dev)
	log := e.log.With("component", "dispatcher")
	if guard.AllowLoopback {
		log.Warn("dispatcher: callbacks to loopback addresses (127.0.0.0/8, ::1) are allowed; set CHIME_DISPATCHER_ALLOW_LOOPBACK=false to refuse them")
	}
	d, err := dispatcher.New(dispatcher.Config{
		Brokers:    e.brokers,
		Topics:     e.cfg.Topics(),
		ClientID:   e.cfg.ClientID + "-dispatcher",
		Membership: e.membership,
		Logger:     log,
		Guard:      guard,
		Namespaces: dispatcher.NamespacesFunc(func(ns string) *chimev1.NamespaceConfig {
			cfg, err := rm.namespaces.Get(ns)
			if err != nil {
				log.Warn("reading namespace config; using the defaults", "namespace", ns, "err", err)
			}
			return cfg
		}),
		Breakers:   rm.breakers,
		SASL:       e.sasl,
		Registerer: e.registry,
	})
	if err != nil {
		return nil, err
	}
	log.Info("dispatcher starting", "id", d.ID(), "group", e.cfg.Topics().DispatcherGroup(), "allow", fmt.Sprint(guard.Allow))
	return d, nil
}
