// Command chime-kafka runs Apache Kafka (KRaft, on 127.0.0.1) from the jars
// `make kafka-jars` fetched, for tests and for trying chime on a real
// broker:
//
//	chime-kafka [-nodes 1] [-dir DIR]                 # serve until Ctrl-C
//	chime-kafka [-nodes 1] -- go test ./...           # run a command against it
//
// A command gets CHIME_TEST_BROKERS (the seed brokers) and CHIME_KAFKA_LIBS
// in its environment; chime-kafka exits with the command's status and stops
// the cluster.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/chime-sched/chime/internal/kafkacluster"
	"github.com/chime-sched/chime/internal/kafkatest"
)

func main() {
	os.Exit(run())
}

func run() int {
	nodes := flag.Int("nodes", 1, "KRaft nodes (combined broker+controller)")
	dir := flag.String("dir", "", "data directory (default: a new temporary one, removed at exit)")
	libs := flag.String("libs", "", "folder of Kafka's jars (default $"+kafkacluster.EnvLibs+" or "+kafkacluster.DefaultLibs+")")
	heap := flag.Int("heap-mb", 512, "heap of each broker JVM")
	flag.Parse()

	if *libs == "" {
		*libs = kafkacluster.FindLibs()
	}
	if *libs == "" {
		fmt.Fprintln(os.Stderr, "chime-kafka: no Kafka jars found; run `make kafka-jars` or set "+kafkacluster.EnvLibs)
		return 2
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "chime-kafka-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "chime-kafka:", err)
			return 1
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := kafkacluster.Start(ctx, kafkacluster.Options{
		Libs: *libs, Dir: *dir, Nodes: *nodes, HeapMB: *heap,
		Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "chime-kafka:", err)
		return 1
	}
	defer c.Close()
	seeds := strings.Join(c.Addrs(), ",")
	fmt.Fprintf(os.Stderr, "chime-kafka: Apache Kafka %s, %d node(s), data in %s\n", kafkacluster.Version, c.Nodes(), *dir)
	fmt.Printf("%s=%s\n", kafkatest.EnvBrokers, seeds)

	if flag.NArg() == 0 {
		<-ctx.Done()
		return 0
	}
	cmd := exec.CommandContext(ctx, flag.Arg(0), flag.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), kafkatest.EnvBrokers+"="+seeds, kafkacluster.EnvLibs+"="+*libs)
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() > 0 {
			return ee.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "chime-kafka:", err)
		return 1
	}
	return 0
}
