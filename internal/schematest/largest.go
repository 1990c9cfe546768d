// Package schematest builds commands and specs for chime's tests: what the
// limits in package schema allow at their edge.
package schematest

import (
	"fmt"
	"strings"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/command"
)

// LargestSpec is the largest job validation accepts: namespace, id, headers,
// labels and body (or Kafka key and value, when kafkaTopic is set) at their
// limits, with schedule s. Tests that bound what chime writes for a job
// (rows, due events, dead letters) start from it.
func LargestSpec(s *chimev1.Schedule, kafkaTopic string) *chimev1.JobSpec {
	headers := map[string]string{}
	left := schema.MaxHeadersBytes
	for i := 0; i < schema.MaxHeaders && left > 0; i++ {
		name := fmt.Sprintf("X-H%02d", i)
		v := strings.Repeat("v", min(schema.MaxHeaderValueLen, left-len(name)))
		headers[name] = v
		left -= len(name) + len(v)
	}
	labels := map[string]string{}
	for i := range schema.MaxLabels {
		labels[fmt.Sprintf("k%02d", i)+strings.Repeat("k", schema.MaxLabelKeyLen-3)] = strings.Repeat("é", schema.MaxLabelValueLen) // 2 bytes each
	}
	spec := &chimev1.JobSpec{
		Namespace: strings.Repeat("n", schema.MaxNamespaceLen), Id: strings.Repeat("j", schema.MaxJobIDLen),
		Schedule: s, Labels: labels,
	}
	if kafkaTopic != "" {
		spec.Target = &chimev1.Target{Kind: &chimev1.Target_Kafka{Kafka: &chimev1.KafkaTarget{
			Topic: kafkaTopic, Key: make([]byte, schema.MaxKafkaKey), Value: make([]byte, schema.MaxKafkaValue), Headers: headers,
		}}}
		return spec
	}
	url := "https://example.com/" + strings.Repeat("p", schema.MaxURLLen-len("https://example.com/"))
	spec.Target = &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{
		Url: url, Headers: headers, Body: make([]byte, schema.MaxHTTPBody),
	}}}
	return spec
}

// Upsert is the command that creates spec, with a short fixed id (the
// sizes measured are those of the spec).
func Upsert(spec *chimev1.JobSpec) *chimev1.JobCommand {
	cmd := command.Upsert(spec)
	cmd.CommandId = "c"
	return cmd
}
