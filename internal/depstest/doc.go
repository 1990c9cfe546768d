// Package depstest holds the test that keeps chime's imports running with
// its data flow: schema → producer → processors → dispatcher → views →
// analytics → api → cmd, with infra (and internal) below all of them, and
// the Kafka stream-processing and HTTP libraries out of the packages that
// do not need them. It has no code; see depstest_test.go.
package depstest
