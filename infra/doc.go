// Package infra groups what chime needs around its own code to run: the
// embedded Kafka-compatible broker (infra/broker), topic provisioning
// (infra/topics), the configuration shared by every role (infra/config) and
// the test cluster helper used by integration tests (internal/kafkatest).
package infra
