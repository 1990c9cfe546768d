package jobquery

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/processors/scheduler/jobindex"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/views/jobquery/signature"
)

const testSecret = "test-query-secret-0123"

// fakeSource is a scheduler instance serving some of 4 partitions.
type fakeSource struct {
	mu     sync.Mutex
	served []int32
	epoch  uint64
	rows   map[string]*chimev1.JobState
	// applied is the job-commands offset applied, by partition; changed
	// is closed (and replaced) whenever it grows.
	applied map[int32]int64
	changed chan struct{}
	// duringRead runs inside every read: a rebalance in the middle.
	duringRead func(*fakeSource)
}

const fakePartitions = 4

func newFakeSource(served ...int32) *fakeSource {
	return &fakeSource{served: served, epoch: 1, rows: map[string]*chimev1.JobState{}, applied: map[int32]int64{}, changed: make(chan struct{})}
}

// put adds a row to the fake, in whichever partition its key falls.
func (f *fakeSource) put(ns, id string, status chimev1.JobStatus, created time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rows[schema.JobKey(ns, id)] = &chimev1.JobState{Spec: &chimev1.JobSpec{Namespace: ns, Id: id}, Status: status, CreatedAt: timestamppb.New(created)}
}

// apply puts a row as the command at offset off of its partition, and
// marks the offset applied.
func (f *fakeSource) apply(ns, id string, status chimev1.JobStatus, created time.Time, off int64) {
	f.put(ns, id, status, created)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied[partitionOf(schema.JobKey(ns, id), fakePartitions)] = off
	close(f.changed)
	f.changed = make(chan struct{})
}

// move serves partitions instead, under a new epoch.
func (f *fakeSource) move(served ...int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.served = served
	f.epoch++
}

func (f *fakeSource) read() {
	if f.duringRead != nil {
		f.duringRead(f)
	}
}

func (f *fakeSource) Get(key string) (*chimev1.JobState, error) {
	f.read()
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := partitionOf(key, fakePartitions); !slices.Contains(f.served, p) {
		return nil, fmt.Errorf("partition %d is not served", p)
	}
	return f.rows[key], nil
}

func (f *fakeSource) index() *jobindex.Memory {
	f.mu.Lock()
	defer f.mu.Unlock()
	x := jobindex.NewMemory()
	for k, st := range f.rows {
		if !slices.Contains(f.served, partitionOf(k, fakePartitions)) {
			continue
		}
		ns, id, _ := schema.SplitJobKey(k)
		x.Change(ns, id, nil, &schema.JobSummary{Status: st.GetStatus(), Created: st.GetCreatedAt().AsTime().UnixNano()})
	}
	return x
}

func (f *fakeSource) LiveJobs(ns string) int64 {
	f.read()
	return f.index().Live(ns)
}

func (f *fakeSource) ListJobs(ns string, q jobindex.Query) ([]jobindex.Entry, bool) {
	f.read()
	return jobindex.List([]*jobindex.Memory{f.index()}, ns, q)
}

func (f *fakeSource) Serving() ([]int32, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.served), f.epoch
}

func (f *fakeSource) Reached(p int32) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Contains(f.served, p) {
		return 0, false
	}
	off, ok := f.applied[p]
	return off, ok
}

func (f *fakeSource) WaitReached(ctx context.Context, want map[int32]int64) error {
	for {
		f.mu.Lock()
		reached := true
		for p, off := range want {
			if slices.Contains(f.served, p) && f.applied[p] < off {
				reached = false
			}
		}
		changed := f.changed
		f.mu.Unlock()
		if reached {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// keyIn returns a job id of ns whose key falls in partition p.
func keyIn(t *testing.T, ns string, p int32) string {
	t.Helper()
	for i := range 1000 {
		id := "j" + strconv.Itoa(i)
		if partitionOf(schema.JobKey(ns, id), fakePartitions) == p {
			return id
		}
	}
	t.Fatalf("no id of %s in partition %d", ns, p)
	return ""
}

type testServer struct {
	src *fakeSource
	url string
	now time.Time
}

func newTestServer(t *testing.T, src *fakeSource) *testServer {
	t.Helper()
	ts := &testServer{src: src, now: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)}
	s, err := NewServer(ServerConfig{Source: src, Partitions: fakePartitions, Secret: testSecret, Now: func() time.Time { return ts.now }})
	require.NoError(t, err)
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	ts.url = hs.URL
	return ts
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
}

// do sends a request signed with secret at signedAt (the zero time: not
// signed); signBody, if not nil, is the body the signature covers.
func (ts *testServer) do(t *testing.T, method, uri string, body []byte, secret string, signedAt time.Time, signBody []byte) answer {
	t.Helper()
	req, err := http.NewRequest(method, ts.url+uri, bytes.NewReader(body))
	require.NoError(t, err)
	if !signedAt.IsZero() {
		if signBody == nil {
			signBody = body
		}
		req.Header.Set(signature.Header, signature.Sign([]byte(secret), signedAt, signature.Request{Method: method, URI: req.URL.RequestURI(), Body: signBody}))
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	a := answer{status: res.StatusCode, header: res.Header}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&a.body))
	return a
}

func (ts *testServer) get(t *testing.T, uri string) answer {
	return ts.do(t, http.MethodGet, uri, nil, testSecret, ts.now, nil)
}

func (ts *testServer) rows(t *testing.T, keys ...string) answer {
	body, _ := json.Marshal(rowsRequest{Keys: keys})
	return ts.do(t, http.MethodPost, pathRows, body, testSecret, ts.now, nil)
}

// TestServerRefusesUnsignedRequests: the query server serves every
// tenant's jobs, so a request without a valid signature gets a 401 that
// says what is wrong, and nothing else.
func TestServerRefusesUnsignedRequests(t *testing.T) {
	t.Parallel()
	src := newFakeSource(0, 1, 2, 3)
	src.put("a", "x", chimev1.JobStatus_JOB_STATUS_SCHEDULED, time.Now())
	ts := newTestServer(t, src)
	body, _ := json.Marshal(rowsRequest{Keys: []string{"a/x"}})
	other, _ := json.Marshal(rowsRequest{Keys: []string{"b/secret"}})
	for _, tc := range []struct {
		name     string
		secret   string
		signedAt time.Time
		signBody []byte
		want     string
	}{
		{"no signature", "", time.Time{}, nil, "no Chime-Query-Signature header"},
		{"another secret", "another-secret-0123456", ts.now, nil, "the signature does not match"},
		{"signed too long ago", testSecret, ts.now.Add(-signature.MaxSkew - time.Second), nil, "synchronise the clocks"},
		{"signed in the future", testSecret, ts.now.Add(signature.MaxSkew + time.Second), nil, "synchronise the clocks"},
		{"another body", testSecret, ts.now, other, "the body is not the one signed"},
	} {
		a := ts.do(t, http.MethodPost, pathRows, body, tc.secret, tc.signedAt, tc.signBody)
		require.Equal(t, http.StatusUnauthorized, a.status, tc.name)
		require.Equal(t, problemUnauthorized, a.body["type"], tc.name)
		require.Contains(t, a.body["detail"], tc.want, tc.name)
		require.NotContains(t, a.body["detail"], testSecret, tc.name)
		require.Nil(t, a.body["rows"], tc.name)
	}
	// The signature covers the query string too: another namespace's
	// listing is not the signed one.
	req, err := http.NewRequest(http.MethodGet, ts.url+pathLive+"?ns=b", nil)
	require.NoError(t, err)
	req.Header.Set(signature.Header, signature.Sign([]byte(testSecret), ts.now, signature.Request{Method: http.MethodGet, URI: pathLive + "?ns=a"}))
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)

	a := ts.rows(t, "a/x")
	require.Equal(t, http.StatusOK, a.status, "signed with the secret: answered")
}

// TestServerSaysNotTheOwner: a key of a partition the instance does not
// serve is a 421 naming the partition and listing those it serves, so the
// router asks the owner instead.
func TestServerSaysNotTheOwner(t *testing.T) {
	t.Parallel()
	src := newFakeSource(0, 1)
	ts := newTestServer(t, src)
	mine, theirs := keyIn(t, "a", 1), keyIn(t, "a", 2)
	src.put("a", mine, chimev1.JobStatus_JOB_STATUS_SCHEDULED, time.Now())

	a := ts.rows(t, "a/"+mine, "a/"+theirs)
	require.Equal(t, http.StatusMisdirectedRequest, a.status)
	require.Equal(t, problemNotOwner, a.body["type"])
	require.Equal(t, "partition 2 is not served by this scheduler instance (it serves [0 1])", a.body["detail"])
	require.Equal(t, []any{0.0, 1.0}, a.body["partitions"])

	a = ts.rows(t, "a/"+mine)
	require.Equal(t, http.StatusOK, a.status)
	require.Equal(t, []any{0.0, 1.0}, a.body["partitions"])
	require.Len(t, a.body["rows"], 1)
	require.NotNil(t, a.body["rows"].([]any)[0])
}

// TestServerAnswersOverWhatItServes: a read during which the served
// partitions change once is read again over the new set, and says so;
// one under which they keep changing is a 503 with Retry-After rather
// than an answer over a set no one can name. An instance serving nothing
// yet answers for no partition.
func TestServerAnswersOverWhatItServes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		during func(*fakeSource)
		want   []any // partitions answered for; nil: 503
	}{
		{"settled", nil, []any{0.0, 1.0, 2.0, 3.0}},
		{"a partition lost during the read", func(f *fakeSource) {
			if len(f.served) == 4 {
				f.move(0, 1, 2)
			}
		}, []any{0.0, 1.0, 2.0}},
		{"partitions changing under every read", func(f *fakeSource) { f.move(0, 1, 2, 3) }, nil},
		{"nothing served yet", func(f *fakeSource) {
			if len(f.served) == 4 {
				f.move()
			}
		}, []any{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mk := func() (*fakeSource, *testServer) {
				src := newFakeSource(0, 1, 2, 3)
				src.put("a", keyIn(t, "a", 0), chimev1.JobStatus_JOB_STATUS_SCHEDULED, time.Now())
				src.duringRead = tc.during
				return src, newTestServer(t, src)
			}
			for _, read := range []func(*testServer) answer{
				func(ts *testServer) answer { return ts.get(t, pathJobs+"?ns=a&limit=10") },
				func(ts *testServer) answer { return ts.get(t, pathLive+"?ns=a") },
			} {
				_, ts := mk()
				a := read(ts)
				if tc.want == nil {
					require.Equal(t, http.StatusServiceUnavailable, a.status)
					require.Equal(t, problemRecovering, a.body["type"])
					require.Equal(t, "1", a.header.Get("Retry-After"))
					continue
				}
				require.Equal(t, http.StatusOK, a.status, "%v", a.body)
				require.Equal(t, tc.want, a.body["partitions"])
			}
		})
	}
}

// TestServerWaitsForOffsets: a read carrying offsets is answered once
// the instance has applied them, and shows their effect; offsets of
// partitions it does not serve are not waited for; offsets it does not
// reach within ReadWait are a 503 behind, with Retry-After.
func TestServerWaitsForOffsets(t *testing.T) {
	t.Parallel()
	src := newFakeSource(0, 1)
	ts := newTestServer(t, src)
	id := keyIn(t, "a", 1)
	after := Offsets{1: 7, 3: 100} // 3 is not served here
	go func() {
		time.Sleep(50 * time.Millisecond) // the read waits meanwhile
		src.apply("a", id, chimev1.JobStatus_JOB_STATUS_PAUSED, time.Now(), 7)
	}()
	a := ts.get(t, pathLive+"?ns=a&after="+url.QueryEscape(after.String()))
	require.Equal(t, http.StatusOK, a.status, "%v", a.body)
	require.EqualValues(t, 1, a.body["live"], "the job of offset 7 is counted")
	a = ts.get(t, pathJobs+"?"+listingQuery("a", jobindex.Query{Limit: 10, Statuses: []chimev1.JobStatus{chimev1.JobStatus_JOB_STATUS_PAUSED}})+"&after="+url.QueryEscape(after.String()))
	require.Equal(t, http.StatusOK, a.status, "%v", a.body)
	require.Len(t, a.body["jobs"], 1)

	start := time.Now()
	a = ts.get(t, pathJobs+"?ns=a&limit=10&after="+url.QueryEscape(Offsets{0: 1}.String()))
	require.Equal(t, http.StatusServiceUnavailable, a.status)
	require.Equal(t, problemBehind, a.body["type"])
	require.Equal(t, "1", a.header.Get("Retry-After"))
	require.Contains(t, a.body["detail"], "0:1")
	require.GreaterOrEqual(t, time.Since(start), ReadWait, "it waited ReadWait first")

	for _, bad := range []string{"x", "0:-1", "4:1", "-1:2", "1"} {
		a := ts.get(t, pathLive+"?ns=a&after="+url.QueryEscape(bad))
		require.Equal(t, http.StatusBadRequest, a.status, bad)
		require.Equal(t, problemInvalid, a.body["type"], bad)
	}
}

func TestOffsetsString(t *testing.T) {
	t.Parallel()
	o := Offsets{}
	o.Add(3, 10)
	o.Add(0, 5)
	o.Add(3, 2) // an older offset does not lower it
	require.Equal(t, "0:5,3:10", o.String())
	back, err := parseOffsets(o.String(), 4)
	require.NoError(t, err)
	require.Equal(t, o, back)
	none, err := parseOffsets("", 4)
	require.NoError(t, err)
	require.Nil(t, none)
}

// TestServerAnswers: rows, a listing page and the live count over the
// partitions the instance owns, each naming them.
func TestServerAnswers(t *testing.T) {
	t.Parallel()
	src := newFakeSource(0, 1, 2, 3)
	t0 := time.Now()
	src.put("a", "old", chimev1.JobStatus_JOB_STATUS_SCHEDULED, t0)
	src.put("a", "mid", chimev1.JobStatus_JOB_STATUS_PAUSED, t0.Add(time.Second))
	src.put("a", "new", chimev1.JobStatus_JOB_STATUS_CANCELLED, t0.Add(2*time.Second))
	src.put("b", "other", chimev1.JobStatus_JOB_STATUS_SCHEDULED, t0)
	ts := newTestServer(t, src)

	a := ts.get(t, pathLive+"?ns=a")
	require.Equal(t, http.StatusOK, a.status)
	require.EqualValues(t, 2, a.body["live"])
	require.Equal(t, []any{0.0, 1.0, 2.0, 3.0}, a.body["partitions"])

	ids := func(a answer) (out []string) {
		for _, j := range a.body["jobs"].([]any) {
			out = append(out, j.(map[string]any)["id"].(string))
		}
		return out
	}
	a = ts.get(t, pathJobs+"?"+listingQuery("a", jobindex.Query{Limit: 2}))
	require.Equal(t, []string{"new", "mid"}, ids(a))
	require.Equal(t, true, a.body["more"])
	a = ts.get(t, pathJobs+"?"+listingQuery("a", jobindex.Query{Limit: 2, After: jobindex.Cursor{Created: t0.Add(time.Second).UnixNano(), ID: "mid"}}))
	require.Equal(t, []string{"old"}, ids(a))
	require.Equal(t, false, a.body["more"])
	a = ts.get(t, pathJobs+"?"+listingQuery("a", jobindex.Query{Limit: 10, Statuses: []chimev1.JobStatus{chimev1.JobStatus_JOB_STATUS_PAUSED}}))
	require.Equal(t, []string{"mid"}, ids(a))

	a = ts.rows(t, "a/mid", "a/none")
	require.Equal(t, http.StatusOK, a.status)
	rows := a.body["rows"].([]any)
	require.NotNil(t, rows[0])
	require.Nil(t, rows[1], "no row: null")

	for _, uri := range []string{pathJobs + "?ns=a", pathJobs + "?ns=a&limit=10&status=99", pathLive, pathJobs + "?ns=a&limit=1&cursor=bm8tY29sb24"} {
		a := ts.get(t, uri)
		require.Equal(t, http.StatusBadRequest, a.status, uri)
		require.Equal(t, problemInvalid, a.body["type"], uri)
	}
}

// TestListingQueryRoundTrip: what the router asks an owner for is what the
// owner reads, labels with ':' and '&' in their values included.
func TestListingQueryRoundTrip(t *testing.T) {
	t.Parallel()
	for _, q := range []jobindex.Query{
		{Limit: 1},
		{Limit: 7, After: jobindex.Cursor{Created: 42, ID: "a/b"}, Statuses: []chimev1.JobStatus{chimev1.JobStatus_JOB_STATUS_PAUSED, chimev1.JobStatus_JOB_STATUS_DEAD}, Internal: true},
		{Limit: 3, Labels: []schema.Label{{Key: "team", Value: "billing"}, {Key: "a/b.c", Value: "x:y&z= é"}, {Key: "empty"}}},
	} {
		r := httptest.NewRequest(http.MethodGet, pathJobs+"?"+listingQuery("n s", q), nil)
		ns, got, err := parseListing(r)
		require.NoError(t, err)
		require.Equal(t, "n s", ns)
		require.Equal(t, q, got)
	}
	_, _, err := parseListing(httptest.NewRequest(http.MethodGet, pathJobs+"?ns=a&limit=1&label=nocolon", nil))
	require.ErrorContains(t, err, "label")
}
