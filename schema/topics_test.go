package schema

import "testing"

func TestIsJobKeyAgreesWithJobKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ key, ns, id string }{
		{"acme/job-1", "acme", "job-1"},
		{"acme/job-1", "acme", "job-2"},
		{"acme/job-1", "acm", "e/job-1"},
		{"acme/job-1", "acme/job", "1"},
		{"acmejob-1", "acme", "job-1"},
		{"acme-job-1", "acme", "job-1"},
		{"/job-1", "", "job-1"},
		{"acme/", "acme", ""},
		{"", "", ""},
		{"a/b/c", "a", "b/c"},
	} {
		if got, want := IsJobKey(tc.key, tc.ns, tc.id), JobKey(tc.ns, tc.id) == tc.key; got != want {
			t.Errorf("IsJobKey(%q, %q, %q) = %v, JobKey says %v", tc.key, tc.ns, tc.id, got, want)
		}
	}
}
