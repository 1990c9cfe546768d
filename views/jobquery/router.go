package jobquery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"golang.org/x/time/rate"

	"github.com/chime-sched/chime/infra/groups"
	"github.com/chime-sched/chime/internal/setting"
	"github.com/chime-sched/chime/processors/scheduler/jobindex"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/views/jobquery/signature"
)

// Router defaults.
const (
	// DefaultCallTimeout bounds one call to an owner, and one description
	// of the group; it leaves an owner ReadWait to reach a read's Offsets.
	DefaultCallTimeout = ReadWait + time.Second
	// DefaultMaxAge is how long a description of the group is used before
	// it is read again, failures aside.
	DefaultMaxAge = 10 * time.Second
)

const (
	// attempts bounds the tries of one read: each retry follows a fresh
	// description of the group (a partition moved, an owner went away).
	attempts = 3
	// refreshGap is the least time between two descriptions forced by
	// failures: during a rebalance every read fails, and one description
	// serves them all.
	refreshGap = 100 * time.Millisecond
	// unsettledAge is how long a description of a group that was
	// rebalancing (or could not be described) is used: the assignment that
	// follows is wanted at once.
	unsettledAge = 250 * time.Millisecond
	// downFor is how long an owner that did not answer is not asked
	// again: a host that is gone (no answer at all) would otherwise hold
	// every read for CallTimeout until the group gives its partitions to
	// another instance.
	downFor = time.Second
)

// RouterConfig is what NewRouter needs.
type RouterConfig struct {
	// Admin describes the scheduler's consumer group.
	Admin *kadm.Client
	// Group is the scheduler's consumer group, Topic one of its input
	// topics (job-commands): a member assigned a partition of it owns
	// that table partition (goka assigns co-partitioned inputs together).
	Group, Topic string
	// Partitions of the scheduler's topics (CHIME_PARTITIONS).
	Partitions int32
	// Secret signs every request (the scheduler instances' query secret).
	Secret string
	// Local, if set, is a scheduler instance of this process (chime dev):
	// the partitions it serves are read from it directly, without HTTP or
	// a look at the group. LocalAddr is what it advertises.
	Local     Source
	LocalAddr string
	// CallTimeout bounds a call to an owner; default DefaultCallTimeout.
	// It must exceed ReadWait, which an owner may spend reaching a read's
	// Offsets.
	CallTimeout time.Duration
	// MaxAge is how long a description of the group is used; default
	// DefaultMaxAge.
	MaxAge time.Duration
	// HTTP calls the owners; default a keep-alive client of its own.
	HTTP   *http.Client
	Now    func() time.Time // default time.Now
	Logger *slog.Logger     // default slog.Default()
}

// Router answers job reads by asking the scheduler instance that owns
// each job's partition. Its methods are what the API reads jobs with
// (api.JobView); every error wraps ErrUnavailable.
type Router struct {
	cfg    RouterConfig
	secret []byte
	local  *local
	hc     *http.Client
	// warn keeps the log to a line per interval while owners fail.
	warn rate.Sometimes

	mu  sync.Mutex
	own *ownership // nil until the group was first described
	// down holds owners that did not answer, until when not to ask them.
	down map[string]time.Time
	// refreshing serialises descriptions of the group.
	refreshing sync.Mutex
}

// ownership is one description of the scheduler group: who owns which
// partition. A new one replaces it whole.
type ownership struct {
	at   time.Time
	addr []string // by partition: its owner's advertised host:port, "" if none
	// why says, by partition, why it has no address.
	why []string
	// unsettled: the group was rebalancing (or could not be described),
	// so addr is the last assignment known; the owners still serve the
	// partitions they keep, and say which they no longer do.
	unsettled bool
	// err is why the description shows no owner at all (the group is
	// empty, or no assignment was ever seen).
	err error
}

// validate applies the defaults to the fields left unset and refuses the
// values the router cannot work with, naming each.
func (c *RouterConfig) validate() error {
	if c.Admin == nil || c.Group == "" || c.Topic == "" || c.Partitions <= 0 {
		return errors.New("jobquery: RouterConfig needs Admin, Group, Topic and Partitions")
	}
	if len(c.Secret) < signature.MinSecretLen {
		return fmt.Errorf("jobquery: the query secret has %d characters; it needs at least %d", len(c.Secret), signature.MinSecretLen)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	err := errors.Join(
		setting.Positive("jobquery", "CallTimeout", &c.CallTimeout, DefaultCallTimeout),
		setting.Positive("jobquery", "MaxAge", &c.MaxAge, DefaultMaxAge),
	)
	if err == nil && c.CallTimeout <= ReadWait {
		err = fmt.Errorf("jobquery: CallTimeout is %s: it must exceed ReadWait (%s), which an owner may spend reaching a read's offsets", c.CallTimeout, ReadWait)
	}
	return err
}

// NewRouter builds a router; it describes the group on first use.
func NewRouter(cfg RouterConfig) (*Router, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &Router{cfg: cfg, secret: []byte(cfg.Secret), hc: cfg.HTTP, warn: rate.Sometimes{Interval: 10 * time.Second}, down: map[string]time.Time{}}
	if r.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		r.hc = &http.Client{Transport: tr, Timeout: cfg.CallTimeout}
	}
	if cfg.Local != nil {
		r.local = &local{src: cfg.Local, partitions: cfg.Partitions}
	}
	return r, nil
}

// Get returns a job's row, nil if there is none, and how far its
// partition had applied the job commands when it was read (Rows).
func (r *Router) Get(ns, id string) (*chimev1.JobState, Offsets, error) {
	rows, reached, err := r.Rows(ns, []string{id})
	if err != nil {
		return nil, nil, err
	}
	return rows[0], reached, nil
}

// Rows returns the rows of the namespace's jobs ids (nil where there is
// none), asking each owner once for all of its jobs, and how far their
// partitions had applied the job commands before they were read (a
// partition missing: not known): a command at or below its partition's
// offset there shows in the rows (read-your-writes without waiting).
func (r *Router) Rows(ns string, ids []string) ([]*chimev1.JobState, Offsets, error) {
	out := make([]*chimev1.JobState, len(ids))
	reached := Offsets{}
	done := make([]bool, len(ids))
	todo := make(map[int32][]int, len(ids)) // partition → indexes of ids
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = jobKey(ns, id)
		p := partitionOf(keys[i], r.cfg.Partitions)
		todo[p] = append(todo[p], i)
	}
	take := func(idx []int, rows []*chimev1.JobState, at Offsets) {
		for j, i := range idx {
			out[i], done[i] = rows[j], true
		}
		for p, off := range at {
			reached.Add(p, off)
		}
	}
	settle := func() {
		for p, idx := range todo {
			if !slices.ContainsFunc(idx, func(i int) bool { return !done[i] }) {
				delete(todo, p)
			}
		}
	}
	var why error
	var seen *ownership
	for try := range attempts {
		if try > 0 {
			r.refresh(seen)
		}
		if r.local != nil {
			var idx []int
			for _, p := range r.localPartitions() {
				idx = append(idx, todo[p]...)
			}
			if len(idx) > 0 {
				rows, at, _, err := r.local.rows(pick(keys, idx))
				switch {
				case err == nil:
					take(idx, rows, at)
					settle()
				case errors.Is(err, errRecovering):
					return nil, nil, unavailable(err)
				}
				// Not the owner any more: the group says who is.
			}
		}
		if len(todo) == 0 {
			return out, reached, nil
		}
		o := r.ownership()
		seen = o
		byAddr, err := r.owners(o, maps.Keys(todo))
		if err != nil {
			why = err
			continue
		}
		type call struct {
			addr string
			idx  []int
			rows []*chimev1.JobState
			at   Offsets
			err  error
		}
		var calls []*call
		for a, ps := range byAddr {
			var idx []int
			for _, p := range ps {
				idx = append(idx, todo[p]...)
			}
			// One call per owner, unless it would ask for too many.
			for len(idx) > 0 {
				n := min(len(idx), MaxKeys)
				calls = append(calls, &call{addr: a, idx: idx[:n]})
				idx = idx[n:]
			}
		}
		var wg sync.WaitGroup
		for _, c := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.rows, c.at, c.err = r.callRows(c.addr, pick(keys, c.idx))
			}()
		}
		wg.Wait()
		for _, c := range calls {
			switch {
			case c.err == nil:
				take(c.idx, c.rows, c.at)
			case !retryable(c.err):
				return nil, nil, unavailable(c.err)
			default:
				why = c.err
			}
		}
		settle()
		if len(todo) == 0 {
			return out, reached, nil
		}
	}
	return nil, nil, unavailable(why)
}

// callRows asks the owner at addr for the rows of keys.
func (r *Router) callRows(addr string, keys []string) ([]*chimev1.JobState, Offsets, error) {
	body, _ := json.Marshal(rowsRequest{Keys: keys}) // strings always encode
	var ans rowsAnswer
	if err := r.call(addr, http.MethodPost, pathRows, body, &ans); err != nil {
		return nil, nil, err
	}
	if len(ans.Rows) != len(keys) {
		return nil, nil, &ownerError{addr: addr, kind: ownerBroken, detail: fmt.Sprintf("answered %d rows for %d keys", len(ans.Rows), len(keys))}
	}
	rows := make([]*chimev1.JobState, len(keys))
	for i, raw := range ans.Rows {
		row, err := decodeRow(raw)
		if err != nil {
			return nil, nil, &ownerError{addr: addr, kind: ownerBroken, detail: err.Error()}
		}
		rows[i] = row
	}
	return rows, ans.Reached, nil
}

// ListJobs returns a page of the namespace's jobs, newest first, and
// whether more follow: the newest of every owner's page, once each owner
// has applied the commands after locates (nil: none).
func (r *Router) ListJobs(ns string, q jobindex.Query, after Offsets) ([]Job, bool, error) {
	q.Limit = max(q.Limit, 1)
	type page struct {
		jobs []Job
		more bool
	}
	pages, err := gather(r, func(l *local) (page, []int32, error) {
		jobs, more, served, err := l.list(context.Background(), ns, q, after)
		return page{jobs, more}, served, err
	}, func(addr string) (page, []int32, error) {
		var ans jobsAnswer
		if err := r.call(addr, http.MethodGet, pathJobs+"?"+listingQuery(ns, q)+afterQuery(after), nil, &ans); err != nil {
			return page{}, nil, err
		}
		pg := page{jobs: make([]Job, len(ans.Jobs)), more: ans.More}
		for i, j := range ans.Jobs {
			row, err := decodeRow(j.Row)
			if err != nil {
				return page{}, nil, &ownerError{addr: addr, kind: ownerBroken, detail: err.Error()}
			}
			pg.jobs[i] = Job{Entry: jobindex.Entry{ID: j.ID, Created: j.Created, Status: chimev1.JobStatus(j.Status)}, Row: row}
		}
		return pg, ans.Partitions, nil
	})
	if err != nil {
		return nil, false, err
	}
	var all []Job
	more := false
	for _, pg := range pages {
		all = append(all, pg.jobs...)
		more = more || pg.more
	}
	slices.SortFunc(all, func(a, b Job) int { return jobindex.Compare(a.Entry, b.Entry) })
	if len(all) > q.Limit {
		all, more = all[:q.Limit], true
	}
	return all, more, nil
}

// LiveJobs counts the namespace's jobs that have not ended, over every
// owner, once each has applied the commands after locates (nil: none).
func (r *Router) LiveJobs(ns string, after Offsets) (int64, error) {
	counts, err := gather(r, func(l *local) (int64, []int32, error) {
		return l.live(context.Background(), ns, after)
	}, func(addr string) (int64, []int32, error) {
		var ans liveAnswer
		if err := r.call(addr, http.MethodGet, pathLive+"?ns="+url.QueryEscape(ns)+afterQuery(after), nil, &ans); err != nil {
			return 0, nil, err
		}
		return ans.Live, ans.Partitions, nil
	})
	var n int64
	for _, c := range counts {
		n += c
	}
	return n, err
}

// afterQuery is the query parameter that carries after, if any.
func afterQuery(after Offsets) string {
	if len(after) == 0 {
		return ""
	}
	return "&after=" + url.QueryEscape(after.String())
}

// gather asks the local instance, then an owner of every partition it
// does not cover, for their part of one answer, and returns the parts
// once they cover every partition exactly once.
func gather[T any](r *Router, fromLocal func(*local) (T, []int32, error), fromOwner func(addr string) (T, []int32, error)) ([]T, error) {
	n := r.cfg.Partitions
	var why error
	var seen *ownership
	for try := range attempts {
		if try > 0 {
			r.refresh(seen)
		}
		covered := make([]bool, n)
		var parts []T
		// add takes a part; false if it covers a partition already covered
		// (it moved between two answers).
		add := func(v T, served []int32) bool {
			for _, p := range served {
				if p < 0 || p >= n || covered[p] {
					return false
				}
			}
			for _, p := range served {
				covered[p] = true
			}
			parts = append(parts, v)
			return true
		}
		missing := func() []int32 {
			var ps []int32
			for p, c := range covered {
				if !c {
					ps = append(ps, int32(p))
				}
			}
			return ps
		}
		if r.local != nil {
			v, served, err := fromLocal(r.local)
			var behind *behindError
			switch {
			case err == nil:
				add(v, served)
			case errors.As(err, &behind):
				return nil, unavailable(err)
			}
			// Its partitions changing: those it may serve are asked below.
		}
		need := missing()
		if len(need) == 0 {
			return parts, nil
		}
		o := r.ownership()
		seen = o
		if o.err != nil {
			why = o.err
			continue
		}
		byAddr, err := r.owners(o, slices.Values(need))
		if err != nil {
			why = err
			continue
		}
		type call struct {
			addr   string
			v      T
			served []int32
			err    error
		}
		calls := make([]*call, 0, len(byAddr))
		for a := range byAddr {
			calls = append(calls, &call{addr: a})
		}
		var wg sync.WaitGroup
		for _, c := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.v, c.served, c.err = fromOwner(c.addr)
			}()
		}
		wg.Wait()
		failed := false
		for _, c := range calls {
			switch {
			case c.err == nil:
				if !add(c.v, c.served) {
					why, failed = fmt.Errorf("the scheduler at %s answered for partitions %s, some of which another instance answered for: they moved while read", c.addr, partitionList(c.served)), true
				}
			case !retryable(c.err):
				return nil, unavailable(c.err)
			default:
				why, failed = c.err, true
			}
		}
		if failed {
			continue
		}
		if need := missing(); len(need) > 0 {
			why = fmt.Errorf("no scheduler instance serves partitions %s now: they are moving", partitionList(need))
			continue
		}
		return parts, nil
	}
	return nil, unavailable(why)
}

// localPartitions are the partitions the local instance serves.
func (r *Router) localPartitions() []int32 {
	if r.local == nil {
		return nil
	}
	ps, _ := r.local.src.Serving()
	return ps
}

// owners groups partitions by the address of their owner in o.
func (r *Router) owners(o *ownership, ps iter.Seq[int32]) (map[string][]int32, error) {
	out := map[string][]int32{}
	for p := range ps {
		a := o.addr[p]
		switch {
		case a == "":
			return nil, fmt.Errorf("partition %d: %s", p, o.why[p])
		case a == r.cfg.LocalAddr && r.local != nil:
			// This process's scheduler does not serve it (yet): it is
			// recovering it, or the description is older than the
			// assignment.
			return nil, fmt.Errorf("partition %d: this process's scheduler does not serve it now (it is recovering it, or it moved)", p)
		}
		out[a] = append(out[a], p)
	}
	return out, nil
}

// ownership returns the current description of the group, reading the
// group first if there is none or it is too old.
func (r *Router) ownership() *ownership {
	r.mu.Lock()
	o := r.own
	r.mu.Unlock()
	if o == nil || r.cfg.Now().Sub(o.at) > o.maxAge(r.cfg.MaxAge) {
		r.refresh(o)
		r.mu.Lock()
		o = r.own
		r.mu.Unlock()
	}
	return o
}

func (o *ownership) maxAge(settled time.Duration) time.Duration {
	if o.err != nil || o.unsettled {
		return unsettledAge
	}
	return settled
}

// refresh describes the group again, unless it was described since seen
// (the description the caller found wanting) or a moment ago.
func (r *Router) refresh(seen *ownership) {
	r.refreshing.Lock()
	defer r.refreshing.Unlock()
	r.mu.Lock()
	cur := r.own
	r.mu.Unlock()
	if cur != seen || (cur != nil && r.cfg.Now().Sub(cur.at) < refreshGap) {
		return
	}
	o := r.describe(cur)
	r.mu.Lock()
	r.own = o
	r.mu.Unlock()
}

// describe reads who owns which partition from the group's description:
// the members' assignments of Topic, and the addresses they advertise.
// While the group rebalances (or cannot be described) it keeps prev's
// owners: a rebalance costs only the partitions that move, whose owners
// say they no longer serve them.
func (r *Router) describe(prev *ownership) *ownership {
	n := r.cfg.Partitions
	o := &ownership{at: r.cfg.Now(), addr: make([]string, n), why: make([]string, n)}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.CallTimeout)
	defer cancel()
	gs, err := r.cfg.Admin.DescribeGroups(ctx, r.cfg.Group)
	if err == nil {
		err = gs.Error()
	}
	g, ok := gs[r.cfg.Group]
	switch {
	case err != nil:
		o.err = fmt.Errorf("describing the scheduler group %s: %w", r.cfg.Group, err)
	case !ok:
		o.err = fmt.Errorf("the scheduler group %s is not described", r.cfg.Group)
	case g.State == "Empty" || g.State == "Dead" || len(g.Members) == 0:
		o.err = fmt.Errorf("the scheduler group %s has no members: %w", r.cfg.Group, errNoMembers)
	case g.State != "Stable":
		// Only a stable group's description shows the assignment.
		o.err = fmt.Errorf("the scheduler group %s is rebalancing (%s)", r.cfg.Group, g.State)
	}
	if o.err != nil {
		if prev != nil && prev.err == nil && !errors.Is(o.err, errNoMembers) {
			kept := *prev
			kept.at, kept.unsettled = o.at, true
			return &kept
		}
		return o
	}
	for i := range o.why {
		o.why[i] = "no member of the scheduler group " + r.cfg.Group + " is assigned it"
	}
	for _, m := range g.Members {
		as, ok := m.Assigned.AsConsumer()
		if !ok {
			continue
		}
		addr := ""
		if meta, ok := m.Join.AsConsumer(); ok {
			addr = groups.Advertised(meta.UserData)
		}
		for _, t := range as.Topics {
			if t.Topic != r.cfg.Topic {
				continue
			}
			for _, p := range t.Partitions {
				if p < 0 || p >= n {
					continue
				}
				o.addr[p] = addr
				if addr == "" {
					o.why[p] = fmt.Sprintf("its owner (client %s, host %s) advertises no query server: a chime scheduler older than this API, which must be upgraded", m.ClientID, m.ClientHost)
				}
			}
		}
	}
	return o
}

// errNoMembers: the group is empty, so no partition has an owner.
var errNoMembers = errors.New("no chime scheduler is running")

// ownerError is a call to an owner that did not give an answer.
type ownerError struct {
	addr   string
	kind   ownerErrorKind
	detail string
}

type ownerErrorKind int

const (
	ownerUnreachable ownerErrorKind = iota // no answer: gone, or not yet listening
	ownerNotOwner                          // 421: the partition moved, or is not served yet
	ownerRecovering                        // 503: the owner's partitions kept changing, or it is behind
	ownerRefused                           // 401: the query secret differs
	ownerBroken                            // any other answer
)

func (e *ownerError) Error() string {
	switch e.kind {
	case ownerUnreachable:
		return "the scheduler at " + e.addr + " does not answer: " + e.detail
	case ownerRefused:
		return "the scheduler at " + e.addr + " refused this API's query signature (" + e.detail + ")"
	}
	return "the scheduler at " + e.addr + ": " + e.detail
}

// Is makes an owner's 503 an errRecovering: asking again at once does
// not help.
func (e *ownerError) Is(target error) bool {
	return target == errRecovering && e.kind == ownerRecovering
}

// retryable errors are worth a fresh look at the group: the partition
// may have moved, or its owner died and the group will say so.
func retryable(err error) bool {
	var oe *ownerError
	if errors.As(err, &oe) {
		return oe.kind == ownerUnreachable || oe.kind == ownerNotOwner
	}
	return !errors.Is(err, errRecovering)
}

// call makes one signed request to the owner at addr and decodes its
// answer into out.
func (r *Router) call(addr, method, uri string, body []byte, out any) error {
	r.mu.Lock()
	until, isDown := r.down[addr]
	r.mu.Unlock()
	if isDown && r.cfg.Now().Before(until) {
		return &ownerError{addr: addr, kind: ownerUnreachable, detail: "it did not answer a moment ago"}
	}
	req, err := http.NewRequest(method, "http://"+addr+uri, bytes.NewReader(body))
	if err != nil {
		return &ownerError{addr: addr, kind: ownerBroken, detail: err.Error()}
	}
	req.Header.Set(signature.Header, signature.Sign(r.secret, r.cfg.Now(), signature.Request{Method: method, URI: req.URL.RequestURI(), Body: body}))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := r.hc.Do(req)
	if err != nil {
		r.warnf("jobquery: a scheduler's query server does not answer; reading the group again", "addr", addr, "err", err)
		r.mu.Lock()
		r.down[addr] = r.cfg.Now().Add(downFor)
		r.mu.Unlock()
		return &ownerError{addr: addr, kind: ownerUnreachable, detail: err.Error()}
	}
	if isDown {
		r.mu.Lock()
		delete(r.down, addr)
		r.mu.Unlock()
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return &ownerError{addr: addr, kind: ownerUnreachable, detail: err.Error()}
	}
	if res.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, out); err != nil {
			return &ownerError{addr: addr, kind: ownerBroken, detail: "the answer does not decode: " + err.Error()}
		}
		return nil
	}
	var p problemAnswer
	if json.Unmarshal(raw, &p) != nil || p.Detail == "" {
		p.Detail = fmt.Sprintf("%s: %.200s", res.Status, raw)
	}
	oe := &ownerError{addr: addr, kind: ownerBroken, detail: p.Detail}
	switch res.StatusCode {
	case http.StatusMisdirectedRequest:
		oe.kind = ownerNotOwner
	case http.StatusServiceUnavailable:
		oe.kind = ownerRecovering
	case http.StatusUnauthorized:
		oe.kind = ownerRefused
		r.cfg.Logger.Error("jobquery: a scheduler refused this API's query signature; set the same CHIME_QUERY_SECRET on every chime api and chime scheduler", "addr", addr, "detail", p.Detail)
	default:
		r.warnf("jobquery: a scheduler's query server failed", "addr", addr, "status", res.StatusCode, "detail", p.Detail)
	}
	return oe
}

func (r *Router) warnf(msg string, args ...any) {
	r.warn.Do(func() { r.cfg.Logger.Warn(msg, args...) })
}

// unavailable wraps why a read could not be answered.
func unavailable(why error) error {
	if why == nil {
		why = errors.New("no owner answered")
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, why)
}

// pick returns keys[i] for each i of idx.
func pick(keys []string, idx []int) []string {
	out := make([]string, len(idx))
	for j, i := range idx {
		out[j] = keys[i]
	}
	return out
}
