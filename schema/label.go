package schema

import (
	"fmt"
	"strings"
)

// Label is one of a job's labels (JobSpec.labels): what listings filter
// by (GET .../jobs?label=key:value).
type Label struct {
	Key, Value string
}

// String is the label as the API and the CLI write it: key:value.
func (l Label) String() string { return l.Key + ":" + l.Value }

// ParseLabel reads key:value (a key holds no ':', so the first one
// splits), checked as a job's label would be.
func ParseLabel(s string) (Label, error) {
	k, v, ok := strings.Cut(s, ":")
	if !ok {
		return Label{}, fmt.Errorf("%q is not key:value", s)
	}
	if err := validateLabels("label", map[string]string{k: v}); err != nil {
		return Label{}, fmt.Errorf("%q: %s", s, err.Reason)
	}
	return Label{Key: k, Value: v}, nil
}
