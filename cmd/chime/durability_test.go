package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/chime-sched/chime/infra/config"
	"github.com/chime-sched/chime/infra/kafkaauth"
	"github.com/chime-sched/chime/internal/freeport"
	"github.com/chime-sched/chime/schema"
)

// TestDevKill9KeepsEveryTopic kills `chime dev` with -9 while every topic
// of its embedded broker is being written (jobs firing, callbacks failing
// into dead letters and breaker trips with their cool-off timers, namespace
// and breaker commands, rejected commands), after the broker has trimmed
// what the readers consumed. After the restart every partition ends at or
// past where it ended before the kill, and no consumer group has committed
// past an end: nothing the broker acknowledged is lost, and no offset a
// reader has read is given to a new record.
func TestDevKill9KeepsEveryTopic(t *testing.T) {
	t.Parallel()
	stateDir := filepath.Join(t.TempDir(), "state")
	port := freeport.For(t)
	brokers := []string{fmt.Sprintf("127.0.0.1:%d", port)}
	dev := startDevAPI(t, stateDir, port)
	admin := readAdminToken(t, stateDir)
	cred, err := kafkaauth.Load(filepath.Join(stateDir, config.KafkaCredentialFile))
	require.NoError(t, err)
	cl, err := kgo.NewClient(append(cred.Kgo(), kgo.SeedBrokers(brokers...), kgo.RecordDeliveryTimeout(5*time.Second))...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	tt := schema.NewTopics("")
	var names []string
	for _, sp := range tt.All() {
		names = append(names, sp.Name)
	}

	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }))
	t.Cleanup(failing.Close)
	good := newReceiver(t)
	for ns, cfg := range map[string]string{
		"good": `{"allowed_hosts": ["127.0.0.1"]}`,
		// One attempt: each failure is a dead letter; the breaker trips
		// after two and its cool-off timers come every second or two.
		"bad": `{"allowed_hosts": ["127.0.0.1"], "retry": {"max_attempts": 1},
			"breaker": {"window": "10s", "min_requests": 2, "failure_rate_threshold": 50, "cool_off": "1s", "max_cool_off": "2s"}}`,
		"ops": `{}`,
	} {
		st, out := dev.call(t, "PUT", "/v1/namespaces/"+ns, admin, cfg)
		require.Equal(t, 201, st, "%s: %v", ns, out)
	}
	for i := range 4 {
		for ns, url := range map[string]string{"good": good.URL, "bad": failing.URL} {
			st, out := dev.call(t, "POST", "/v1/namespaces/"+ns+"/jobs", admin,
				fmt.Sprintf(`{"id": "every-%d", "schedule": {"every": "1s"}, "callback": {"url": "%s/%d"}}`, i, url, i))
			require.Equal(t, 201, st, "%s: %v", ns, out)
		}
	}

	// Commands of every kind, until the kill: namespace and breaker
	// commands, one-shot jobs, and namespace commands that are rejected.
	stop := make(chan struct{})
	var writers sync.WaitGroup
	// The writers outlive the kill: they keep the first process's address
	// (the restarted one listens on the same port), not dev, which the
	// test replaces.
	base := dev.base
	writers.Go(func() {
		c := &http.Client{Timeout: 5 * time.Second}
		send := func(method, path, body string) {
			req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+admin)
			if res, err := c.Do(req); err == nil {
				res.Body.Close()
			}
		}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
			send("PUT", "/v1/namespaces/ops", fmt.Sprintf(`{"labels": {"round": "%d"}}`, i))
			send("POST", "/v1/namespaces/ops/breaker/reset", "")
			send("POST", "/v1/namespaces/good/jobs", fmt.Sprintf(`{"schedule": {"in": "1s"}, "callback": {"url": "%s/once"}}`, good.URL))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			cl.ProduceSync(ctx, &kgo.Record{Topic: tt.NamespaceCommands(), Key: fmt.Appendf(nil, "bogus-%d", i%7), Value: []byte("not a command")})
			cancel()
		}
	})
	var stopOnce sync.Once
	stopWriters := func() { stopOnce.Do(func() { close(stop); writers.Wait() }) }
	defer stopWriters()

	ends := func() map[string]int64 {
		t.Helper()
		listed, err := adm.ListEndOffsets(t.Context(), names...)
		require.NoError(t, err)
		require.NoError(t, listed.Error())
		out := map[string]int64{}
		listed.Each(func(o kadm.ListedOffset) { out[fmt.Sprintf("%s/%d", o.Topic, o.Partition)] = o.Offset })
		return out
	}
	waitFor(t, 90*time.Second, "records in every topic", func() bool {
		written := map[string]bool{}
		for p, end := range ends() {
			if end > 0 {
				written[p[:strings.LastIndexByte(p, '/')]] = true
			}
		}
		return len(written) == len(names)
	})
	// A trimming pass of the broker (every 30 s) after that: partitions
	// whose records were all read are trimmed as far as the broker goes.
	trimmedOnce := func() bool {
		starts, err := adm.ListStartOffsets(t.Context(), names...)
		require.NoError(t, err)
		end := ends()
		trimmed := false
		starts.Each(func(o kadm.ListedOffset) {
			e := end[fmt.Sprintf("%s/%d", o.Topic, o.Partition)]
			trimmed = trimmed || e > 0 && o.Offset >= e-1 && o.Offset > 0
		})
		return trimmed
	}
	waitFor(t, 90*time.Second, "the broker's trimming of what was read", trimmedOnce)

	before := ends()
	require.NoError(t, dev.cmd.Process.Signal(syscall.SIGKILL))
	<-dev.exited
	dev = startDevAPI(t, stateDir, port)
	after := ends()
	var lost []string
	for p, end := range before {
		if after[p] < end {
			lost = append(lost, fmt.Sprintf("%s ended at %d, now at %d", p, end, after[p]))
		}
	}
	sort.Strings(lost)
	require.Empty(t, lost, "every partition keeps the records acknowledged before the kill")

	groups, err := adm.ListGroups(t.Context())
	require.NoError(t, err)
	committed := adm.FetchManyOffsets(t.Context(), groups.Groups()...)
	require.NoError(t, committed.Error())
	var past []string
	for group, r := range committed {
		r.Fetched.Each(func(o kadm.OffsetResponse) {
			if p := fmt.Sprintf("%s/%d", o.Topic, o.Partition); o.At > after[p] {
				past = append(past, fmt.Sprintf("%s committed %d on %s, which ends at %d", group, o.At, p, after[p]))
			}
		})
	}
	require.Empty(t, past, "no group has committed past the end of a partition")
	stopWriters()
	require.NoError(t, dev.cmd.Process.Signal(syscall.SIGTERM))
	<-dev.exited
}
