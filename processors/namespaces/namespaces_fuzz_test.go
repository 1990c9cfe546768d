package namespaces

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// FuzzApply: any record on namespace-commands is applied or rejected,
// never a panic, and a configuration it stores is one the validation
// accepts.
func FuzzApply(f *testing.F) {
	put, _ := proto.Marshal(&chimev1.NamespaceCommand{CommandId: "c", Namespace: "acme",
		Command: &chimev1.NamespaceCommand_Put{Put: &chimev1.NamespaceConfig{Namespace: "acme", MaxConcurrency: 4, Spread: 2}}})
	key, _ := proto.Marshal(&chimev1.NamespaceCommand{CommandId: "k", Namespace: "acme",
		Command: &chimev1.NamespaceCommand_AddKey{AddKey: &chimev1.AddKey{KeyHash: make([]byte, 32)}}})
	f.Add("acme", put, false)
	f.Add("acme", key, true)
	f.Add("", []byte{0x0a}, true)
	f.Add("other", put, true)
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, k string, raw []byte, existing bool) {
		var cur *chimev1.NamespaceConfig
		if existing {
			cur = &chimev1.NamespaceConfig{Namespace: k, Version: 3}
		}
		got, rej := Apply(k, cur, raw, now)
		if got != nil && rej != nil {
			t.Fatalf("both a config and a rejection")
		}
		if got != nil && got != cur {
			if err := schema.ValidateNamespaceConfig(got); err != nil {
				t.Fatalf("stored an invalid config: %v", err)
			}
		}
	})
}
