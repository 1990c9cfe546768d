package jobquery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chime-sched/chime/internal/lifecycle"
	"github.com/chime-sched/chime/views/jobquery/signature"
)

// DefaultProbeInterval is how often a SecretProbe asks the scheduler
// instances again.
const DefaultProbeInterval = 15 * time.Second

// SecretProbe is the part (lifecycle.Part) that checks, at start and
// every interval, that the scheduler instances accept this process's
// query signature: it sends each instance the group names (other than
// this process's own) a signed GET /query/v1/ping. While one answers 401,
// its query secret differs, and every job read and create of this API
// process would fail: Ready says which instance refused and why (GET
// /readyz), and the refusal is logged when it starts. No instance yet (no
// scheduler running, none reachable, the group rebalancing) is not a
// refusal, and is asked again. The part is started once its first probe
// is done, refused or not: nothing waits on it, only readiness reports
// it.
type SecretProbe struct {
	lifecycle.Base
	r        *Router
	interval time.Duration

	mu      sync.Mutex
	refused error // the last verdict: nil, or which instances refused
}

// NewSecretProbe probes the instances r reads from every interval (0:
// DefaultProbeInterval).
func NewSecretProbe(r *Router, interval time.Duration) *SecretProbe {
	if interval <= 0 {
		interval = DefaultProbeInterval
	}
	return &SecretProbe{r: r, interval: interval}
}

// Name implements lifecycle.Part.
func (p *SecretProbe) Name() string { return "query secret" }

// Start implements lifecycle.Part.
func (p *SecretProbe) Start(ctx context.Context) error { return p.Go(ctx, p.run) }

// Ready is nil while no scheduler instance refuses this process's
// signature, from the first probe on.
func (p *SecretProbe) Ready() error {
	if err := p.Base.Ready(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

func (p *SecretProbe) run(ctx context.Context, ready func()) error {
	log := p.r.cfg.Logger
	first := true
	for {
		refused, decided := p.probe(ctx)
		p.mu.Lock()
		was := p.refused
		if decided {
			p.refused = refused
		}
		now := p.refused
		p.mu.Unlock()
		switch {
		case now != nil && (was == nil || was.Error() != now.Error()):
			log.Error("job reads refused: this API process is not ready until the schedulers accept its query secret", "err", now)
		case now == nil && was != nil:
			log.Info("the schedulers accept this API process's query secret again")
		case first && !decided && p.r.local == nil:
			// (In chime dev the scheduler is this process's own.)
			log.Info("no scheduler instance answers yet: the query secret is checked once one does", "every", p.interval)
		}
		ready() // the first verdict is in
		first = false
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(p.interval):
		}
	}
}

// probe asks every instance the group names whether it accepts this
// process's signature. decided is false when none answered either way.
func (p *SecretProbe) probe(ctx context.Context) (refused error, decided bool) {
	o := p.r.describe(nil)
	if o.err != nil {
		return nil, false
	}
	var addrs []string
	for _, a := range o.addr {
		if a != "" && !(p.r.local != nil && a == p.r.cfg.LocalAddr) && !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	slices.Sort(addrs)
	type verdict struct {
		answered bool
		refusal  string
	}
	verdicts := make([]verdict, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Go(func() { verdicts[i].answered, verdicts[i].refusal = p.ping(ctx, a) })
	}
	wg.Wait()
	var why []string
	for i, v := range verdicts {
		decided = decided || v.answered
		if v.refusal != "" {
			why = append(why, fmt.Sprintf("the scheduler at %s refuses this API process's query signature (%s)", addrs[i], v.refusal))
		}
	}
	if len(why) > 0 {
		return errors.New(strings.Join(why, "; ")), true
	}
	return nil, decided
}

// ping sends one signed request to the instance at addr: answered is
// whether it answered at all, refusal what its 401 said.
func (p *SecretProbe) ping(ctx context.Context, addr string) (answered bool, refusal string) {
	ctx, cancel := context.WithTimeout(ctx, p.r.cfg.CallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+pathPing, nil)
	if err != nil {
		return false, ""
	}
	req.Header.Set(signature.Header, signature.Sign(p.r.secret, p.r.cfg.Now(), signature.Request{Method: http.MethodGet, URI: pathPing}))
	res, err := p.r.hc.Do(req)
	if err != nil {
		return false, ""
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		// Any other answer came past the signature check (a scheduler
		// older than the ping route answers 404).
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
		return true, ""
	}
	var pa problemAnswer
	if json.NewDecoder(io.LimitReader(res.Body, 64<<10)).Decode(&pa) != nil || pa.Detail == "" {
		pa.Detail = res.Status
	}
	return true, pa.Detail
}
