package bodybudget_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/internal/bodybudget"
)

func TestReserve(t *testing.T) {
	t.Parallel()
	_, err := bodybudget.New(0)
	require.ErrorContains(t, err, "must be positive")
	b, err := bodybudget.New(100)
	require.NoError(t, err)

	first, ok := b.Reserve(60, 50) // over the limit: limit+1 is what Read may hold
	require.True(t, ok)
	_, ok = b.Reserve(50, 1000)
	require.False(t, ok, "51 + 50 > 100")
	second, ok := b.Reserve(49, 1000)
	require.True(t, ok, "51 + 49 = 100")
	none, ok := b.Reserve(0, 1000)
	require.True(t, ok, "an empty body takes nothing")
	none.Release()
	_, ok = b.Reserve(1, 1000)
	require.False(t, ok)

	first.Release()
	chunked, ok := b.Reserve(-1, 40)
	require.True(t, ok, "a body of unknown length takes limit+1")
	_, ok = b.Reserve(11, 1000)
	require.False(t, ok, "49 + 41 + 11 > 100")
	chunked.Release()
	second.Release()
	_, ok = b.Reserve(101, 1000)
	require.False(t, ok, "never more than the whole budget")
	all, ok := b.Reserve(100, 1000)
	require.True(t, ok)
	all.Release()
}

func TestRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		body      string
		announced int64
		want      string
		err       error
	}{
		{"announced", "hello", 5, "hello", nil},
		{"announced, slowly", "hello", 5, "hello", nil},
		{"unknown length", "hello", -1, "hello", nil},
		{"at the limit", "0123456789", -1, "0123456789", nil},
		{"over the limit, unknown length", "0123456789x", -1, "", bodybudget.ErrTooLarge},
		{"announced over the limit", "", 11, "", bodybudget.ErrTooLarge},
		{"shorter than announced", "hell", 5, "", io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := io.Reader(strings.NewReader(tc.body))
			if strings.Contains(tc.name, "slowly") {
				r = iotest.OneByteReader(r)
			}
			got, err := bodybudget.Read(r, tc.announced, 10)
			if tc.err != nil {
				require.True(t, errors.Is(err, tc.err), "%v", err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
		})
	}
}
