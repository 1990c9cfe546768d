// Package processors holds what chime's goka processors share: the
// settings every processor and view is configured with (Client, Config),
// the sarama configuration goka runs with, and the supervision loop that
// restarts a processor after a broker outage. The processors themselves live in the
// sub-packages (scheduler, breaker, namespaces).
package processors
