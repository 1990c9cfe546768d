package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/chime-sched/chime/dispatcher"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/views"
)

// Dispatcher settings read from the environment until infra/config
// carries them (docs/dispatcher.md lists them).
const (
	envAllowCIDRs    = "CHIME_DISPATCHER_ALLOW_CIDRS"
	envAllowLoopback = "CHIME_DISPATCHER_ALLOW_LOOPBACK"
)

// dispatcherGuard builds the SSRF guard: the allowlisted CIDRs, and
// loopback when allowed (by default only in `chime dev`, whose callbacks
// usually go to a local receiver).
func dispatcherGuard(getenv func(string) string, dev bool) (dispatcher.Guard, error) {
	g := dispatcher.Guard{AllowLoopback: dev}
	if v := strings.TrimSpace(getenv(envAllowLoopback)); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return g, fmt.Errorf("%s=%q: must be true or false", envAllowLoopback, v)
		}
		g.AllowLoopback = b
	}
	for _, s := range strings.Split(getenv(envAllowCIDRs), ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			if a, aerr := netip.ParseAddr(s); aerr == nil {
				p = netip.PrefixFrom(a, a.BitLen())
			} else {
				return g, fmt.Errorf("%s: %q is not a CIDR (10.1.2.0/24) or an address: %w", envAllowCIDRs, s, err)
			}
		}
		g.Allow = append(g.Allow, p.Masked())
	}
	return g, nil
}

func roleDispatcher(ctx context.Context, e *env) error { return runDispatcher(ctx, e, false) }

// runDispatcher runs the dispatcher role; dev allows loopback callbacks
// unless CHIME_DISPATCHER_ALLOW_LOOPBACK=false. Namespace configuration
// (limits, retry policy, signing secret, allowed hosts) comes from the
// namespace-config table through a view; the dispatcher starts only once
// the view has caught up, so no callback goes out unsigned or unlimited
// because its namespace's config was not read yet.
func runDispatcher(ctx context.Context, e *env, dev bool) error {
	guard, err := dispatcherGuard(os.Getenv, dev)
	if err != nil {
		return err
	}
	log := e.log.With("component", "dispatcher")
	if guard.AllowLoopback {
		log.Warn("dispatcher: callbacks to loopback addresses (127.0.0.0/8, ::1) are allowed; set " + envAllowLoopback + "=false to refuse them")
	}
	nsView, err := views.NewNamespaces(e.brokers, e.cfg.Topics(), e.cfg.ClientID+"-dispatcher-namespaces", e.replicationOf(e.cfg.Topics().NamespaceTable()), log)
	if err != nil {
		return err
	}
	d, err := dispatcher.New(dispatcher.Config{
		Brokers:  e.brokers,
		Topics:   e.cfg.Topics(),
		ClientID: e.cfg.ClientID + "-dispatcher",
		Logger:   log,
		Guard:    guard,
		Namespaces: dispatcher.NamespacesFunc(func(ns string) *chimev1.NamespaceConfig {
			cfg, err := nsView.Get(ns)
			if err != nil {
				log.Warn("reading namespace config; using the defaults", "namespace", ns, "err", err)
			}
			return cfg
		}),
	})
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return nsView.Run(ctx) })
	g.Go(func() error {
		if err := nsView.WaitReady(ctx); err != nil {
			return nil // stopping before the view caught up
		}
		log.Info("dispatcher starting", "id", d.ID(), "group", dispatcher.GroupName(e.cfg.Topics()), "allow", fmt.Sprint(guard.Allow))
		return d.Run(ctx)
	})
	return g.Wait()
}
