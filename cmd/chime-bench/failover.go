package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/chime-sched/chime/infra/groups"
	"github.com/chime-sched/chime/internal/kafkacluster"
	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
)

// The failover phase runs chime's roles as separate processes, two of
// each, on Apache Kafka (one KRaft node from `make kafka-jars`), under a
// steady load of one-shot jobs (one namespace spread over all six due
// partitions, so both dispatchers carry it), and kills one process of each role with
// SIGKILL in turn, without restarting it: the survivors must take over.
// Then the last dispatcher is killed and restarted at once under the same
// state dir (so the same static member ID). It reports, per kill, how long
// the role's consumer group took to hand the dead member's partitions over,
// and the callback lag of the jobs due around the kill.

const (
	failoverRate   = 200              // jobs due per second
	failoverGap    = 15 * time.Second // between kills
	failoverLead   = 12 * time.Second // load before the first kill
	failoverPrefix = "fo."
	// failoverNamespace is spread over every due partition (6), so both
	// dispatchers carry it and a dispatcher kill always hits part of it.
	failoverNamespace = "fo"
)

type roleProc struct {
	role, dir string
	apiAddr   string // api: kept across restarts
	bin       string
	brokers   string
	cmd       *exec.Cmd
	log       *os.File
	exited    chan struct{}

	// env is appended to the environment start sets, so its variables
	// win (the capacity phase sets its own prefix, partitions, metrics
	// address and ClickHouse).
	env []string
}

func (p *roleProc) start() {
	lf, err := os.OpenFile(filepath.Join(p.dir, p.role+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		fail("%v", err)
	}
	p.log = lf
	if p.apiAddr == "" {
		p.apiAddr = "127.0.0.1:" + strconv.Itoa(freePort())
	}
	cmd := exec.Command(p.bin, p.role)
	cmd.Env = append(os.Environ(),
		"CHIME_BROKERS="+p.brokers,
		"CHIME_TOPIC_PREFIX="+failoverPrefix,
		"CHIME_PARTITIONS=6",
		"CHIME_STATE_DIR="+filepath.Join(p.dir, "state"),
		"CHIME_API_ADDR="+p.apiAddr,
		"CHIME_ADMIN_TOKEN="+e2eAdmin,
		"CHIME_DISPATCHER_ALLOW_LOOPBACK=true",
		"CHIME_CLICKHOUSE_DSN=",
		"CHIME_METRICS_ADDR=",
		// Every role reads the same secret: the API asks the schedulers
		// for job rows (views/jobquery), each role having its own state dir.
		"CHIME_QUERY_SECRET="+benchQuerySecret,
	)
	cmd.Env = append(cmd.Env, p.env...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		fail("start chime %s: %v", p.role, err)
	}
	p.cmd = cmd
	p.exited = make(chan struct{})
	go func() { _ = cmd.Wait(); lf.Close(); close(p.exited) }()
}

// benchQuerySecret is the query secret of the roles the harness runs as
// processes.
const benchQuerySecret = "chime-bench-query-secret-0123456789"

// kill9 kills the process and its children (a sink's local ClickHouse).
func (p *roleProc) kill9() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
}

func (p *roleProc) stop() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.kill9()
	}
}

// instanceID is the static member ID the process derives (see
// cmd/chime/membership.go): client ID "chime", this host, its state dir.
func (p *roleProc) instanceID() string {
	host, err := os.Hostname()
	if err != nil {
		host = "host"
	}
	abs, _ := filepath.Abs(filepath.Join(p.dir, "state"))
	return groups.DeriveInstanceID("chime", host, abs)
}

type kill struct {
	label    string
	at       time.Time
	takeover time.Duration // -1: not measured (no group)
	lag      deliveryStats
}

func benchFailover(ctx context.Context, o e2eOptions, rcv *receiverProc) []result {
	libs := kafkacluster.FindLibs()
	if libs == "" {
		return []result{{"failover on Apache Kafka", "skipped: no Kafka jars (run `make kafka-jars`)", "—", "—"}}
	}
	root, err := os.MkdirTemp("", "chime-bench-failover-")
	if err != nil {
		fail("%v", err)
	}
	defer func() {
		if !o.keepLogs {
			os.RemoveAll(root)
		} else {
			fmt.Fprintf(os.Stderr, "  failover logs kept in %s\n", root)
		}
	}()
	fmt.Fprintf(os.Stderr, "failover: starting Apache Kafka %s...\n", kafkacluster.Version)
	kc, err := kafkacluster.Start(ctx, kafkacluster.Options{Libs: libs, Dir: filepath.Join(root, "kafka")})
	if err != nil {
		fail("%v", err)
	}
	defer kc.Close()
	brokers := strings.Join(kc.Addrs(), ",")

	roles := []string{"scheduler", "dispatcher", "breaker", "sink", "api"}
	procs := map[string][]*roleProc{}
	for _, r := range roles {
		for i := range 2 {
			p := &roleProc{role: r, dir: filepath.Join(root, r+strconv.Itoa(i)), bin: o.chime, brokers: brokers}
			if err := os.MkdirAll(p.dir, 0o700); err != nil {
				fail("%v", err)
			}
			p.start()
			procs[r] = append(procs[r], p)
		}
		if r == "scheduler" {
			// The first process provisions the topics; the
			// others start on them.
			time.Sleep(3 * time.Second)
		}
	}
	defer func() {
		for _, ps := range procs {
			for _, p := range ps {
				p.stop()
			}
		}
	}()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs()...))
	if err != nil {
		fail("%v", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	tt := schema.NewTopics(failoverPrefix)
	groupOf := map[string]string{
		"scheduler":  tt.SchedulerGroup(),
		"dispatcher": tt.DispatcherGroup(),
		"breaker":    tt.BreakerGroup(),
		"sink":       tt.SinkGroup(),
	}
	fmt.Fprintf(os.Stderr, "failover: waiting for two members in each group...\n")
	for r, g := range groupOf {
		if !waitGroup(ctx, adm, g, 2, 2*time.Minute) {
			fail("failover: group %s of %s never had two stable members; logs in %s", g, r, root)
		}
	}

	api := &chimeProc{apiAddr: procs["api"][0].apiAddr, hc: &http.Client{Timeout: 10 * time.Second}}
	for deadline := time.Now().Add(time.Minute); ; {
		st, _ := api.call(ctx, "PUT", "/v1/namespaces/"+failoverNamespace, []byte(`{"spread": 6}`))
		if st == http.StatusOK || st == http.StatusCreated {
			break
		}
		if time.Now().After(deadline) {
			fail("failover: creating namespace %s: HTTP %d; logs in %s", failoverNamespace, st, root)
		}
		time.Sleep(500 * time.Millisecond)
	}

	// The load: jobs due at failoverRate per second, from lead before the
	// first kill until failoverGap after the last (5 kills + a restart).
	kills := []string{"scheduler", "dispatcher", "breaker", "sink", "api", "dispatcher (restarted at once)"}
	total := failoverLead + time.Duration(len(kills)+1)*failoverGap
	n := int(total.Seconds()) * failoverRate
	start := time.Now().Add(10 * time.Second) // time to publish them
	at := func(i int) time.Time { return start.Add(time.Duration(i) * time.Second / failoverRate) }
	rcv.reset(n)
	fmt.Fprintf(os.Stderr, "failover: publishing %d jobs due over %s...\n", n, total)
	p, err := producer.New(producer.Brokers(kc.Addrs()), producer.TopicPrefix(failoverPrefix))
	if err != nil {
		fail("producer: %v", err)
	}
	for i := range n {
		spec := &chimeJobSpec{i: i, at: at(i), url: rcv.url(), ns: failoverNamespace}
		p.ScheduleAsync(ctx, spec.proto(), func(_ producer.Receipt, err error) {
			if err != nil {
				fail("producer: %v", err)
			}
		})
	}
	if err := p.Flush(ctx); err != nil {
		fail("producer flush: %v", err)
	}
	p.Close()

	var done []kill
	for i, what := range kills {
		when := start.Add(failoverLead + time.Duration(i)*failoverGap)
		time.Sleep(time.Until(when))
		role := strings.Fields(what)[0]
		victim := procs[role][0]
		restart := strings.Contains(what, "restarted")
		g, grouped := groupOf[role]
		oldMember := ""
		if grouped {
			oldMember = memberOf(ctx, adm, g, victim.instanceID())
		}
		fmt.Fprintf(os.Stderr, "failover: kill -9 one %s...\n", what)
		k := kill{label: what, at: time.Now(), takeover: -1}
		victim.kill9()
		if restart {
			victim.start()
		} else {
			procs[role] = procs[role][1:]
		}
		if grouped && waitTakeover(ctx, adm, takeover{group: g, want: len(procs[role]), instance: victim.instanceID(), oldMember: oldMember, back: restart}, time.Minute) {
			k.takeover = time.Since(k.at)
		}
		done = append(done, k)
	}
	end := start.Add(total)
	time.Sleep(time.Until(end))
	// Repeated calls count in the receiver's total, so wait for every job
	// by its own count, not for n calls.
	var a arrivals
	for deadline := time.Now().Add(90 * time.Second); ; {
		a = rcv.results(n)
		if !slices.Contains(a.count, 0) || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Second)
	}
	all := summarize(a, at)

	var out []result
	add := func(name, value, target, met string) {
		out = append(out, result{"failover on Kafka: " + name, value, target, met})
	}
	add(fmt.Sprintf("%d jobs at %d/s, 2 processes per role, lost / repeated", n, failoverRate),
		fmt.Sprintf("%d / %d", all.lost, all.repeated), "0 lost", verdict(all.lost == 0))
	for _, k := range done {
		// The jobs due from 1 s before the kill to 10 s after.
		from, to := k.at.Add(-time.Second), k.at.Add(10*time.Second)
		var idx []int
		for i := range n {
			if t := at(i); !t.Before(from) && t.Before(to) {
				idx = append(idx, i)
			}
		}
		sub := arrivals{first: make([]int64, len(idx)), count: make([]int32, len(idx))}
		for j, i := range idx {
			sub.first[j], sub.count[j] = a.first[i], a.count[i]
		}
		k.lag = summarize(sub, func(j int) time.Time { return at(idx[j]) })
		take := "no consumer group"
		if k.takeover >= 0 {
			take = fmt.Sprintf("%.1f s", k.takeover.Seconds())
		} else if groupOf[strings.Fields(k.label)[0]] != "" {
			take = "not within 1 min"
		}
		add("kill -9 "+k.label+": partitions taken over after", take, "—", "—")
		add("kill -9 "+k.label+": lag p50 / p99 / max of jobs due −1 s … +10 s", k.lag.lagString(), "p99 ≤ 10 s", verdict(k.lag.p99 <= 10*time.Second && k.lag.lost == 0))
	}
	return out
}

// memberOf returns the member ID of instance in group ("" if none).
func memberOf(ctx context.Context, adm *kadm.Client, group, instance string) string {
	gs, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return ""
	}
	for _, m := range gs[group].Members {
		if m.InstanceID != nil && *m.InstanceID == instance {
			return m.MemberID
		}
	}
	return ""
}

// waitGroup waits until group is stable with want members.
func waitGroup(ctx context.Context, adm *kadm.Client, group string, want int, within time.Duration) bool {
	return waitTakeover(ctx, adm, takeover{group: group, want: want}, within)
}

// takeover is what a consumer group looks like once a killed process's
// partitions are taken over: stable with want members, without oldMember
// (the killed process's member ID, "" if none); with back, instance is a
// member again under a new member ID (the restarted process); without,
// instance ("" if none) is no member at all (the survivors own
// everything).
type takeover struct {
	group     string
	want      int
	instance  string
	oldMember string
	back      bool
}

// waitTakeover waits until the group is as t says.
func waitTakeover(ctx context.Context, adm *kadm.Client, t takeover, within time.Duration) bool {
	group, want, instance, oldMember, back := t.group, t.want, t.instance, t.oldMember, t.back
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		gs, err := adm.DescribeGroups(ctx, group)
		if g, ok := gs[group]; err == nil && ok && g.Err == nil && g.State == "Stable" && len(g.Members) == want {
			ok := true
			for _, m := range g.Members {
				if m.MemberID == oldMember && oldMember != "" {
					ok = false
				}
				if !back && instance != "" && m.InstanceID != nil && *m.InstanceID == instance {
					ok = false
				}
			}
			if back && memberOf(ctx, adm, group, instance) == "" {
				ok = false
			}
			if ok {
				return true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}
