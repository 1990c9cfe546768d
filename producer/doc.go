// Package producer owns publishing job commands straight into Kafka: the Go
// SDK for services that already run next to the cluster and want to schedule,
// cancel, pause, resume or trigger jobs without a round trip through chime's
// HTTP API. The commands themselves are built by package
// [github.com/chime-sched/chime/schema/command], for [Producer.Publish] and
// [Producer.PublishAsync] as for the API and the dispatcher.
//
// # Producer or HTTP API
//
// Use the producer when the caller is a Go service with access to the Kafka
// cluster and needs throughput (a Producer publishes well over 100k commands
// per second, batching and pipelining them) or wants the command to travel
// with the rest of its Kafka traffic. Use the HTTP API when the caller is not
// written in Go, cannot reach Kafka, or needs an answer that only the
// scheduler's state can give (does the namespace exist, what is the job's
// status): the producer knows nothing of that state.
//
// Create the namespace first (PUT /v1/namespaces/{ns} with the admin token).
// With [CheckNamespaces] the producer refuses a job of a namespace chime does
// not know ([ErrUnknownNamespace]) and publishes nothing. Without it the
// scheduler holds such a job for a minute (its view of the namespaces may
// lag the API's), then rejects it on the rejections topic, field
// "namespace", as the API would answer 404, and logs a warning.
//
// # Connecting
//
// A Producer takes everything it connects with as options: the brokers
// ([Brokers]), the topic prefix ([TopicPrefix]), SASL/PLAIN ([SASLPlain]),
// and TLS or other franz-go settings ([KgoOptions]). It reads no
// environment variable and no process-wide setting. The embedded broker of
// `chime dev` requires SASL/PLAIN: chime dev writes its address to
// <state dir>/kafka-brokers at every start and keeps the credential in
// <state dir>/kafka-credential ("user:password"); Example (ChimeDev)
// connects with both. A publish to an address where nothing listens (every
// seed broker refuses the connection, and none was ever made) fails at once
// with an [*UnreachableError], and publishes nothing.
//
// # Guarantees
//
//   - A command is validated with [schema.ValidateCommand] before anything is
//     sent. A command that fails returns the [*schema.ValidationError]
//     unchanged and is not published.
//   - A synchronous call (Schedule, Cancel, Publish, ...) returns once the
//     partition leader and all in-sync replicas have stored the record
//     (acks=all). An acknowledged command is durable: the scheduler will see
//     it, even if this process dies right after.
//   - The client is an idempotent producer: the retries it makes on its own
//     (lost connections, leader changes) never write a command twice, and the
//     commands of one job stay in the order they were published.
//   - Records are keyed "namespace/job_id" and partitioned with sarama's FNV-1a
//     hash, exactly as goka partitions, so every command of a job reaches the
//     partition that holds the job's row. A client partitioning any other way
//     would silently split a job's state.
//   - Acknowledged is not applied. A command that passes validation here can
//     still be rejected by the scheduler, which checks what only it knows (a
//     Kafka target's topic is on its allowlist, the job exists and is in a
//     state the command applies to). Rejections are written to the
//     rejections topic ([schema.Topics.Rejections]) with the command's
//     command_id: watch it, or ask the HTTP API, to learn the outcome.
//   - A publish whose context ends while the record is in flight returns an
//     error, but the command may still be stored: with an idempotent producer a
//     request already sent cannot be called back. Publishing it again is
//     safe: Upsert, Cancel, Pause and Resume state where the job should be;
//     Retry and Defer name the emission they answer (emit_seq), so the
//     scheduler ignores a stale repeat; an Ack closes its fire once, and a
//     repeat finds nothing left to close. Trigger is the exception: each
//     Trigger call is a fire of its own, so calling it again may fire the
//     job twice (the same trigger record delivered twice fires once: the
//     scheduler skips a repeated command id).
//
// Commands whose outcome is never awaited (PublishAsync, ScheduleAsync) are
// only as durable as their callbacks say: call [Producer.Flush] before
// [Producer.Close], which fails everything still buffered.
package producer
