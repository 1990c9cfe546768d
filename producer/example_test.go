package producer_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/command"
)

// startKafka starts a kfake cluster standing in for Kafka, with the
// job-commands topic chime provisions.
func startKafka() (brokers []string, stop func()) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(8, schema.NewTopics("").JobCommands()))
	if err != nil {
		log.Fatal(err)
	}
	return cluster.ListenAddrs(), cluster.Close
}

func Example() {
	brokers, stop := startKafka()
	defer stop()

	p, err := producer.New(producer.Brokers(brokers), producer.ClientID("billing"))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Call the billing service back tomorrow about invoice 42.
	r, err := p.Schedule(ctx, &chimev1.JobSpec{
		Namespace: "billing",
		Id:        "invoice-42",
		Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_At{
			At: timestamppb.New(time.Now().Add(24 * time.Hour)),
		}},
		Target: &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{
			Url: "https://billing.example.com/hooks/invoice-due",
		}}},
	})
	var invalid *schema.ValidationError
	switch {
	case errors.As(err, &invalid):
		log.Fatalf("fix the job: %v", invalid) // nothing was published
	case err != nil:
		log.Fatal(err) // Kafka did not acknowledge the command
	}
	fmt.Printf("durable on partition %d at offset %d\n", r.Partition, r.Offset)

	// The invoice was paid: the reminder is no longer needed.
	if _, err := p.Cancel(ctx, "billing", "invoice-42", "paid"); err != nil {
		log.Fatal(err)
	}
	// Output: durable on partition 5 at offset 0
}

// Example_chimeDev schedules a job through the Kafka of a `chime dev`
// running on this machine, as a Go service beside it would. chime dev
// writes into its state dir (CHIME_STATE_DIR, default ./.chime) the address
// its broker listens on (kafka-brokers) and the SASL/PLAIN credential the
// broker requires (kafka-credential, "user:password"), at every start.
//
// The namespace must exist: create it over the API first (PUT
// /v1/namespaces/acme, as the README's quick start does). With
// CheckNamespaces the producer refuses a job of a namespace chime does not
// know, instead of publishing one the scheduler would reject a minute
// later.
func Example_chimeDev() {
	stateDir := cmp.Or(os.Getenv("CHIME_STATE_DIR"), ".chime")
	addrs, err := os.ReadFile(filepath.Join(stateDir, "kafka-brokers"))
	if err != nil {
		log.Fatalf("is chime dev running with state dir %s? %v", stateDir, err)
	}
	raw, err := os.ReadFile(filepath.Join(stateDir, "kafka-credential"))
	if err != nil {
		log.Fatal(err)
	}
	user, password, _ := strings.Cut(strings.TrimSpace(string(raw)), ":")

	p, err := producer.New(
		producer.Brokers(strings.Split(strings.TrimSpace(string(addrs)), ",")),
		producer.SASLPlain(user, password),
		producer.CheckNamespaces(),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A call to `chime echo` (127.0.0.1:9999) in five seconds.
	_, err = p.Schedule(ctx, &chimev1.JobSpec{
		Namespace: "acme",
		Id:        "hello",
		Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_At{
			At: timestamppb.New(time.Now().Add(5 * time.Second)),
		}},
		Target: &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{
			Url:  "http://127.0.0.1:9999/hook",
			Body: []byte("hello from the Go SDK"),
		}}},
	})
	var unreachable *producer.UnreachableError
	switch {
	case errors.Is(err, producer.ErrUnknownNamespace):
		log.Fatal(err) // create the namespace over the API first
	case errors.As(err, &unreachable):
		log.Fatal(err) // nothing listens at the address: chime dev is not running
	case err != nil:
		log.Fatal(err) // a SASL error: the credential is not this chime dev's
	}
	fmt.Println("scheduled acme/hello")
}

func ExampleProducer_ScheduleMany() {
	brokers, stop := startKafka()
	defer stop()

	p, err := producer.New(producer.Brokers(brokers))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	specs := make([]*chimev1.JobSpec, 100)
	for i := range specs {
		specs[i] = &chimev1.JobSpec{
			Namespace: "billing",
			Id:        fmt.Sprintf("invoice-%d", i),
			Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_Every{Every: &chimev1.Every{
				Interval: durationpb.New(24 * time.Hour),
			}}},
			Target: &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{
				Url: fmt.Sprintf("https://billing.example.com/hooks/invoice/%d", i),
			}}},
		}
	}
	receipts, err := p.ScheduleMany(context.Background(), specs)
	var failed *producer.BatchError
	switch {
	case errors.As(err, &failed):
		for i, err := range failed.Errs {
			if err != nil {
				log.Printf("%s: %v", specs[i].GetId(), err) // publish it again
			}
		}
	case err != nil:
		log.Fatal(err) // a spec is invalid: nothing was published
	}
	fmt.Println(len(receipts), "jobs scheduled")
	// Output: 100 jobs scheduled
}

func ExampleProducer_PublishAsync() {
	brokers, stop := startKafka()
	defer stop()

	p, err := producer.New(producer.Brokers(brokers))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	ctx := context.Background()
	var acked atomic.Int64
	for i := range 1000 {
		p.PublishAsync(ctx, command.Pause("billing", fmt.Sprintf("invoice-%d", i)), func(r producer.Receipt, err error) {
			if err != nil {
				log.Printf("command %s: %v", r.CommandID, err)
				return
			}
			acked.Add(1)
		})
	}
	// Wait for every acknowledgement (and callback) before Close.
	if err := p.Flush(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(acked.Load(), "pauses acknowledged")
	// Output: 1000 pauses acknowledged
}
