package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/chime-sched/chime/infra/clickhouse"
	"github.com/chime-sched/chime/internal/kafkacluster"
	"github.com/chime-sched/chime/schema"
)

// capCluster is what the capacity phase's roles run against: one Apache
// Kafka node and one local ClickHouse, both children of this process, so
// their CPU time and RSS can be read from /proc like the roles'.
type capCluster struct {
	dir       string
	kc        *kafkacluster.Cluster
	ch        *clickhouse.Server
	cl        *kgo.Client
	adm       *kadm.Client
	brokerPID int
	chPID     int
	rcv       *receiverProc
	o         *capacityOptions
}

func startCapCluster(ctx context.Context, libs, dir string, rcv *receiverProc, o *capacityOptions) *capCluster {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		fail("%v", err)
	}
	c := &capCluster{dir: dir, rcv: rcv, o: o}
	kc, err := kafkacluster.Start(ctx, kafkacluster.Options{Libs: libs, Dir: filepath.Join(dir, "kafka")})
	if err != nil {
		fail("capacity: %v", err)
	}
	c.kc = kc
	// kafkacluster keeps its JVM to itself; it is our child, the only one
	// running kafka.Kafka (the previous cluster was closed and waited for).
	if c.brokerPID = childWith("kafka.Kafka"); c.brokerPID == 0 {
		fail("capacity: no Kafka broker among this process's children")
	}
	// One ClickHouse for every sink: a sink's local ClickHouse would be
	// started per sink process and counted in its process group.
	ch, err := clickhouse.Start(ctx, clickhouse.Options{Dir: filepath.Join(dir, "clickhouse")})
	if err != nil {
		fail("capacity: local ClickHouse (run `make clickhouse`): %v", err)
	}
	c.ch = ch
	if c.chPID = childWith("chimech"); c.chPID == 0 {
		fail("capacity: no ClickHouse among this process's children")
	}
	if c.cl, err = kgo.NewClient(kgo.SeedBrokers(kc.Addrs()...)); err != nil {
		fail("%v", err)
	}
	c.adm = kadm.NewClient(c.cl)
	return c
}

func (c *capCluster) close() {
	c.cl.Close()
	_ = c.ch.Stop()
	c.kc.Close()
}

// clickhouseBytes reads what the sinks' rows take in ClickHouse: for each
// table of chime's database with rows, the compressed bytes of its active
// parts per row. Parts written at a few thousand rows a second are small,
// so this is an upper bound of what merged parts take.
func (c *capCluster) clickhouseBytes(ctx context.Context) []string {
	out, err := c.ch.Query(ctx, "SELECT table, sum(rows), sum(data_compressed_bytes) FROM system.parts "+
		"WHERE active AND database = 'chime' GROUP BY table HAVING sum(rows) > 0 ORDER BY sum(data_compressed_bytes) DESC FORMAT TabSeparated")
	if err != nil {
		fmt.Fprintf(os.Stderr, "capacity: ClickHouse parts: %v\n", err)
		return nil
	}
	var rows []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			continue
		}
		n, err1 := strconv.ParseFloat(f[1], 64)
		b, err2 := strconv.ParseFloat(f[2], 64)
		if err1 != nil || err2 != nil || n <= 0 {
			continue
		}
		rows = append(rows, fmt.Sprintf("%s %.0f B (%.0f)", f[0], b/n, n))
	}
	return rows
}

// childWith returns the pid of this process's child whose command line
// contains s (0 if none).
func childWith(s string) int {
	for _, pid := range procChildren(os.Getpid()) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err == nil && bytes.Contains(b, []byte(s)) {
			return pid
		}
	}
	return 0
}

// capDeploy is one chime installation on the cluster: its topic prefix,
// partition count and role processes.
type capDeploy struct {
	c          *capCluster
	bin        string
	prefix     string
	partitions int
	procs      []*capProc
	hc         *http.Client
}

// capProc is one role process and where it serves /metrics.
type capProc struct {
	*roleProc
	label   string // "scheduler 1": the role and its number
	metrics *chimeProc
}

func (p *capProc) pid() int { return p.cmd.Process.Pid }

func (p *capProc) scrape(ctx context.Context) scrape { return p.metrics.scrape(ctx) }

func (p *capProc) stateDir() string { return filepath.Join(p.dir, "state") }

func (c *capCluster) deploy(bin, prefix string, partitions int) *capDeploy {
	return &capDeploy{c: c, bin: bin, prefix: prefix, partitions: partitions,
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}, Timeout: time.Minute}}
}

func (d *capDeploy) topics() schema.Topics { return schema.NewTopics(d.prefix) }

// add starts one more process of role. The first process of a deployment
// provisions the topics; the others are started once they exist, so that
// they check rather than race to create them.
func (d *capDeploy) add(ctx context.Context, role string) *capProc {
	n := 1
	for _, p := range d.procs {
		if p.role == role {
			n++
		}
	}
	dir := filepath.Join(d.c.dir, strings.TrimSuffix(d.prefix, "."), role+strconv.Itoa(n))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		fail("%v", err)
	}
	metrics := "127.0.0.1:" + strconv.Itoa(freePort())
	env := []string{
		"CHIME_TOPIC_PREFIX=" + d.prefix,
		"CHIME_PARTITIONS=" + strconv.Itoa(d.partitions),
		"CHIME_METRICS_ADDR=" + metrics,
	}
	if role == "sink" {
		env = append(env, "CHIME_CLICKHOUSE_DSN="+d.c.ch.DSN("chime"))
	}
	p := &capProc{
		roleProc: &roleProc{role: role, dir: dir, bin: d.bin, brokers: strings.Join(d.c.kc.Addrs(), ","), env: env},
		label:    fmt.Sprintf("%s %d", role, n),
		metrics:  &chimeProc{apiAddr: metrics, metricsAddr: metrics, hc: d.hc},
	}
	p.start()
	d.procs = append(d.procs, p)
	if len(d.procs) == 1 {
		d.waitTopics(ctx, p)
	}
	return p
}

// waitTopics waits until every topic of the deployment exists.
func (d *capDeploy) waitTopics(ctx context.Context, p *capProc) {
	want := d.topics().All()
	for deadline := time.Now().Add(2 * time.Minute); ; {
		td, err := d.c.adm.ListTopics(ctx)
		if err == nil {
			missing := 0
			for _, t := range want {
				if !td.Has(t.Name) {
					missing++
				}
			}
			if missing == 0 {
				return
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			fail("capacity: %s did not create the topics of %s in 2m; its log: %s", p.label, d.prefix, filepath.Join(p.dir, p.role+".log"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// groupOf is the consumer group whose members are the role's processes.
func (d *capDeploy) groupOf(role string) string {
	tt := d.topics()
	return map[string]string{
		"scheduler":  tt.SchedulerGroup(),
		"dispatcher": tt.DispatcherGroup(),
		"breaker":    tt.BreakerGroup(),
		"sink":       tt.SinkGroup(),
	}[role]
}

func (d *capDeploy) count(role string) int {
	n := 0
	for _, p := range d.procs {
		if p.role == role {
			n++
		}
	}
	return n
}

// waitReady waits until each role's group is stable with all of the
// role's processes in it, and the API answers /readyz.
func (d *capDeploy) waitReady(ctx context.Context) {
	for _, role := range []string{"scheduler", "dispatcher", "breaker", "sink"} {
		n := d.count(role)
		if n == 0 {
			continue
		}
		if !waitGroup(ctx, d.c.adm, d.groupOf(role), n, 2*time.Minute) {
			fail("capacity: group %s never had %d stable members; logs under %s", d.groupOf(role), n, d.c.dir)
		}
	}
	if api := d.api(); api != nil {
		c := d.apiClient()
		for deadline := time.Now().Add(2 * time.Minute); ; {
			if st, _ := c.call(ctx, "GET", "/readyz", nil); st == http.StatusOK {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				fail("capacity: the API is not ready in 2m; its log: %s", filepath.Join(api.dir, "api.log"))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

func (d *capDeploy) api() *capProc {
	for _, p := range d.procs {
		if p.role == "api" {
			return p
		}
	}
	return nil
}

// apiClient calls the deployment's API with the admin token (no quotas).
func (d *capDeploy) apiClient() *chimeProc {
	return &chimeProc{apiAddr: d.api().apiAddr, hc: d.hc}
}

// remove stops p (SIGTERM: it leaves its groups) and forgets it.
func (d *capDeploy) remove(p *capProc) {
	p.stop()
	for i, q := range d.procs {
		if q == p {
			d.procs = append(d.procs[:i], d.procs[i+1:]...)
			break
		}
	}
}

func (d *capDeploy) stop() {
	for _, p := range d.procs {
		p.stop()
	}
	d.procs = nil
}

// The load's namespaces: one hot namespace carries half of the jobs,
// spread over several due partitions as a big client would be
// (docs/dispatcher.md#hot-namespaces-spread); the other half is shared by
// capColdNamespaces namespaces of their own partitions.
const (
	capHot            = "hot"
	capColdNamespaces = 8
)

func capCold(k int) string { return "cold-" + strconv.Itoa(k) }

// createNamespaces creates the load's namespaces and waits until the
// API's view shows them (the scheduler reads the same table).
func (d *capDeploy) createNamespaces(ctx context.Context, spread int) {
	api := d.apiClient()
	bodies := map[string]string{capHot: fmt.Sprintf(`{"spread": %d, "max_concurrency": 10000}`, spread)}
	for k := range capColdNamespaces {
		bodies[capCold(k)] = `{"max_concurrency": 1000}`
	}
	for name, body := range bodies {
		d.putNamespace(ctx, api, name, body)
	}
}

func (d *capDeploy) putNamespace(ctx context.Context, api *chimeProc, name, body string) {
	deadline := time.Now().Add(time.Minute)
	for {
		st, out := api.call(ctx, "PUT", "/v1/namespaces/"+name, []byte(body))
		if st == http.StatusOK || st == http.StatusCreated {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			fail("capacity: namespace %s: HTTP %d %.300s", name, st, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for {
		if st, _ := api.call(ctx, "GET", "/v1/namespaces/"+name, nil); st == http.StatusOK {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			fail("capacity: namespace %s created but not readable in 1m", name)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// topicStats returns, per topic of the prefix and for Kafka's offsets
// topic (where every group's commits go), the sum of the partitions' end
// offsets and of their log sizes (DescribeLogDirs: the segments' bytes on
// the broker's disk).
func topicStats(ctx context.Context, adm *kadm.Client, prefix string) (records, size map[string]int64) {
	td, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		fail("capacity: list topics: %v", err)
	}
	var names []string
	keep := map[string]bool{}
	for _, t := range td.Sorted() {
		if strings.HasPrefix(t.Topic, prefix) || t.Topic == "__consumer_offsets" {
			names = append(names, t.Topic)
			keep[t.Topic] = true
		}
	}
	records, size = map[string]int64{}, map[string]int64{}
	ends, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		fail("capacity: end offsets: %v", err)
	}
	ends.Each(func(o kadm.ListedOffset) { records[o.Topic] += o.Offset })
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		fail("capacity: log dirs: %v", err)
	}
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if keep[p.Topic] {
				size[p.Topic] += p.Size
			}
		})
	})
	return records, size
}

// memberCommitted returns, per member of group (by instance ID), the sum of
// the committed offsets of the partitions assigned to it: how far it has
// consumed, for roles without a counter of their own (the sink).
func memberCommitted(ctx context.Context, adm *kadm.Client, group string) map[string]int64 {
	out := map[string]int64{}
	gs, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return out
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return out
	}
	for _, m := range gs[group].Members {
		a, ok := m.Assigned.AsConsumer()
		if !ok || m.InstanceID == nil {
			continue
		}
		for _, t := range a.Topics {
			for _, p := range t.Partitions {
				if o, ok := offs.Lookup(t.Topic, p); ok && o.Err == nil && o.At > 0 {
					out[*m.InstanceID] += o.At
				}
			}
		}
	}
	return out
}

// groupLag is the total lag of one consumer group.
func groupLag(ctx context.Context, adm *kadm.Client, group string) (int64, error) {
	lags, err := adm.Lag(ctx, group)
	if err != nil {
		return 0, err
	}
	l, ok := lags[group]
	if !ok {
		return 0, fmt.Errorf("group %s not described", group)
	}
	if l.Error() != nil {
		return 0, l.Error()
	}
	return l.Lag.Total(), nil
}

// dirSize is the disk space the files under dir take (allocated blocks,
// as du counts them: a preallocated or sparse file counts what it holds).
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return nil
		}
		if info, err := e.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}
