// Command chime runs chime's roles. `chime dev` runs everything in one
// process on an embedded broker; each role also runs on its own, against a
// real Kafka cluster named by CHIME_BROKERS.
//
// default.pgo beside this file is a CPU profile of `make bench`'s burst:
// go build optimises the binary with it (profile-guided optimisation,
// -pgo=auto), which made the burst 4-7 % faster in alternated runs
// (README, 30 November). `make pgo` refreshes it; do so after changing
// the hot path, before measuring: a profile of the code before a change
// misguides the inlining of what changed (it cost more than the change
// saved, README).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `chime: a scheduler that fires callbacks at the times clients ask for.

Usage:
  chime dev        [flags]   everything in one process; embedded broker unless CHIME_BROKERS is set
  chime scheduler  [flags]   the scheduler role
  chime dispatcher [flags]   the dispatcher role: due events become HTTP callbacks
  chime breaker    [flags]   the circuit breaker and namespace-config processors
  chime api        [flags]   the HTTP API on --addr (docs/api.md)
  chime sink       [flags]   the analytics sink: outcomes and breaker history into ClickHouse
  chime broker     [flags]   the embedded broker alone, for roles run as processes of their own
  chime topics     [flags]   create or check every topic, then exit
  chime client     ...       call the HTTP API ("chime client" for the shortcuts)
  chime echo       [flags]   a callback receiver that prints what it gets (on 127.0.0.1:9999)
  chime version

Run "chime <command> -h" for the flags; docs/configuration.md lists them all
with their environment variables.
`

var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
}

// proc is what a command gets of its process: its arguments (after the
// command's name), the environment and the standard streams.
type proc struct {
	args []string
	// lookupEnv is os.LookupEnv's: the client tells a variable set empty
	// from one not set.
	lookupEnv      func(string) (string, bool)
	stdin          io.Reader
	stdout, stderr io.Writer
}

// getenv is os.Getenv's answer.
func (p proc) getenv(k string) string { v, _ := p.lookupEnv(k); return v }

// run takes the environment as os.LookupEnv does.
func run(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	// The state dir holds the embedded broker's log (namespace keys'
	// hashes, signing secrets), the admin token and the scheduler's rows:
	// whatever chime (and the ClickHouse it starts) creates is its
	// owner's alone.
	syscall.Umask(0o077)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	cmd := args[0]
	p := proc{args: args[1:], lookupEnv: lookupEnv, stdin: os.Stdin, stdout: stdout, stderr: stderr}
	var err error
	switch cmd {
	case "dev":
		err = runRole(ctx, p, "dev", roleDev)
	case "scheduler":
		err = runRole(ctx, p, "scheduler", roleScheduler)
	case "dispatcher":
		err = runRole(ctx, p, "dispatcher", roleDispatcher)
	case "breaker":
		err = runRole(ctx, p, "breaker", roleBreaker)
	case "api":
		err = runRole(ctx, p, "api", roleAPI)
	case "sink":
		err = runRole(ctx, p, "sink", roleSink)
	case "broker":
		err = runRole(ctx, p, "broker", roleBroker)
	case "client":
		return runClient(ctx, p)
	case "echo":
		err = runEcho(ctx, p.args, stdout, stderr)
	case "topics":
		err = runRole(ctx, p, "topics", roleTopics)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "chime", version)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "chime: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "chime:", err)
		return 1
	}
	return 0
}
