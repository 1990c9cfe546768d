package broker_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/chime-sched/chime/infra/broker"
)

// The topics of keepOptions, one for each way the broker deletes records:
// a stream its reader consumed, a stream past its retention, a stream
// created with a retention setting of its own, and a table (compacted)
// whose rows are older than Kafka's default retention.
const (
	keepConsumed = "consumed"
	keepExpired  = "expired"
	keepOverride = "override"
	keepTable    = "table"
	keepReader   = "reader"
)

// keepOptions are chime's own broker options, shrunk: every way of
// deleting records runs every 20 ms.
func keepOptions(dir string) broker.Options {
	return broker.Options{
		DataDir:        dir,
		CleanerBackoff: 20 * time.Millisecond,
		Streams: []broker.Stream{
			{Topic: keepConsumed, Readers: []string{keepReader}},
			{Topic: keepExpired, Retention: time.Hour},
			{Topic: keepOverride, Retention: time.Hour},
		},
		Tables:        []string{keepTable},
		MinDirtyBytes: 1,
	}
}

// writeToBeTrimmed writes records that each of the broker's ways of
// deleting will delete (see keepOptions): all of each partition but the
// last record.
func writeToBeTrimmed(ctx context.Context, addrs []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	hour, compact := "3600000", "compact"
	for topic, cfg := range map[string]map[string]*string{
		keepConsumed: nil, keepExpired: nil,
		keepOverride: {"retention.ms": &hour},
		keepTable:    {"cleanup.policy": &compact},
	} {
		resp, err := adm.CreateTopic(ctx, 2, 1, cfg, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", topic, err)
		}
	}
	old, week := time.Now().Add(-2*time.Hour), time.Now().Add(-8*24*time.Hour)
	var recs []*kgo.Record
	for i := range 40 {
		key := []byte(strconv.Itoa(i))
		recs = append(recs,
			&kgo.Record{Topic: keepConsumed, Key: key, Value: key},
			&kgo.Record{Topic: keepExpired, Key: key, Value: key, Timestamp: old},
			&kgo.Record{Topic: keepOverride, Key: key, Value: key, Timestamp: old},
			&kgo.Record{Topic: keepTable, Key: key, Value: key, Timestamp: week})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return err
	}
	ends, err := adm.ListEndOffsets(ctx, keepConsumed)
	if err != nil {
		return err
	}
	// The reader consumed everything.
	resp, err := adm.CommitOffsets(ctx, keepReader, ends.Offsets())
	if err == nil {
		err = resp.Error()
	}
	return err
}

// trimmed says whether the broker trimmed streams at least as far as it
// will (each partition's last record stays).
func trimmed(ctx context.Context, addrs []string, streams ...string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, streams...)
	if err != nil {
		return err
	}
	ends, err := adm.ListEndOffsets(ctx, streams...)
	if err != nil {
		return err
	}
	var errs []string
	ends.Each(func(end kadm.ListedOffset) {
		if start, _ := starts.Lookup(end.Topic, end.Partition); end.Offset > 0 && start.Offset < end.Offset-1 {
			errs = append(errs, fmt.Sprintf("%s/%d holds %d-%d", end.Topic, end.Partition, start.Offset, end.Offset))
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("not trimmed yet: %s", strings.Join(errs, "; "))
	}
	return nil
}

// partitionEnds are the end offsets of every partition of topics.
func partitionEnds(t *testing.T, addrs []string, topics ...string) map[string]int64 {
	t.Helper()
	ends, err := kadm.NewClient(newClient(t, addrs)).ListEndOffsets(ctxT(t), topics...)
	require.NoError(t, err)
	require.NoError(t, ends.Error())
	out := map[string]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[fmt.Sprintf("%s/%d", o.Topic, o.Partition)] = o.Offset })
	return out
}

// TestBrokerKeepsWhatItAcknowledged: once the broker trimmed its streams
// (consumed, or past their retention) and compacted its tables, a restart,
// clean or after kill -9, finds every partition at the offset it had: the
// records written next do not reuse offsets consumers have read, and no
// table row is lost, however old.
func TestBrokerKeepsWhatItAcknowledged(t *testing.T) {
	t.Parallel()
	all := []string{keepConsumed, keepExpired, keepOverride, keepTable}
	for _, stop := range []string{"clean", "kill -9"} {
		t.Run(stop, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var before map[string]int64
			if stop == "clean" {
				b, err := broker.Start(keepOptions(dir))
				require.NoError(t, err)
				require.NoError(t, writeToBeTrimmed(ctxT(t), b.Addrs()))
				checkFor(t, 20*time.Second, 20*time.Millisecond, func() error { return trimmed(ctxT(t), b.Addrs(), keepConsumed, keepOverride) })
				before = partitionEnds(t, b.Addrs(), all...)
				require.NoError(t, b.Close())
			} else {
				addr, kill := startKeepChild(t, dir)
				before = partitionEnds(t, []string{addr}, all...)
				kill()
			}
			require.Len(t, before, 8)
			for p, end := range before {
				require.Positive(t, end, p)
			}

			b, err := broker.Start(keepOptions(dir))
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })
			require.Equal(t, before, partitionEnds(t, b.Addrs(), all...), "every partition where it was")
			rows := readAll(t, b.Addrs(), keepTable, 40)
			keys := map[string]bool{}
			for _, r := range rows {
				keys[string(r.Key)] = true
			}
			require.Len(t, keys, 40, "every table row, however old")

			// The stream past its retention is trimmed too, as far as the
			// others; the retention set on a topic is the broker's to apply.
			checkFor(t, 20*time.Second, 20*time.Millisecond, func() error { return trimmed(ctxT(t), b.Addrs(), keepExpired) })
			configs, err := kadm.NewClient(newClient(t, b.Addrs())).DescribeTopicConfigs(ctxT(t), keepOverride)
			require.NoError(t, err)
			for _, c := range configs[0].Configs {
				require.False(t, c.Key == "retention.ms" && c.Source == kmsg.ConfigSourceDynamicTopicConfig, "retention.ms of %s was removed", keepOverride)
			}
		})
	}
}

// startKeepChild runs writeToBeTrimmed in a broker of a child process (this
// test binary) on dir, waits until the broker trimmed, and returns its
// address and a kill -9.
func startKeepChild(t *testing.T, dir string) (string, func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChildDir+"="+dir, envChildScenario+"=keep")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- strings.TrimSpace(line)
	}()
	var addr string
	select {
	case line := <-ready:
		_, err := fmt.Sscanf(line, "ready %s", &addr)
		require.NoError(t, err, "child said %q", line)
	case <-time.After(60 * time.Second):
		t.Fatal("child broker did not trim in 60s")
	}
	return addr, func() {
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
	}
}

// runKeepChild is the child of startKeepChild: it says "ready ADDR" once
// the streams that every broker trims are trimmed.
func runKeepChild(dir string) error {
	b, err := broker.Start(keepOptions(dir))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	if err := writeToBeTrimmed(ctx, b.Addrs()); err != nil {
		return err
	}
	for {
		err := trimmed(ctx, b.Addrs(), keepConsumed, keepOverride)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Printf("ready %s\n", b.Addrs()[0])
	return nil
}
