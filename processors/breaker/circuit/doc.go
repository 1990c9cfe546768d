// Package circuit owns the breaker's decisions, without Kafka: the ring of
// event-time buckets a namespace's outcomes fall in (window.go), the state
// machine that trips, half-opens and closes on them (machine.go), and the
// question a dispatcher asks before each callback (gate.go). Everything here
// is pure: a status in, the status changed in place and the transitions
// out, the clock passed in.
//
// It is its own package so that the dispatcher, which asks Gate before each
// callback, does not link goka, sarama and LevelDB through the breaker
// processor (processors/breaker), which runs these functions in the stream
// of outcomes, timers and commands.
package circuit
