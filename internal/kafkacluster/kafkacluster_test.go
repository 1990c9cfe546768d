package kafkacluster

import (
	"encoding/base64"
	"strings"
	"testing"
)

// A cluster ID never starts with '-' (the storage tool would take it for
// an option), and is 16 bytes in URL-safe base64, as Kafka's own.
func TestClusterIDIsNeverAnOption(t *testing.T) {
	t.Parallel()
	for range 10_000 { // without the check, about 156 of them would start with '-'
		id := newClusterID()
		if strings.HasPrefix(id, "-") {
			t.Fatalf("cluster ID %q starts with '-'", id)
		}
		if b, err := base64.RawURLEncoding.DecodeString(id); err != nil || len(b) != 16 {
			t.Fatalf("cluster ID %q is not 16 bytes of URL-safe base64: %v", id, err)
		}
	}
}
