package analytics

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// A DSN's password never shows in Open's errors (it was printed whole when
// a parameter did not parse).
func TestOpenErrorsDoNotShowThePassword(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{
		"clickhouse://chime:s3cret@127.0.0.1:9000/db?dial_timeout=bad",
		"clickhouse://127.0.0.1:9000/db?username=chime&password=s3cret&dial_timeout=bad",
		"clickhouse://chime:s3cret@127.0.0.1:9000/db?max_open_conns=x",
		"clickhouse://chime:s3cret@%zz/db",
	} {
		_, err := Open(context.Background(), dsn, Options{})
		require.Error(t, err, dsn)
		require.NotContains(t, err.Error(), "s3cret", dsn)
	}
	require.Equal(t, "clickhouse://chime:xxxxx@h:9000/db?dial_timeout=1s&password=xxxxx",
		RedactDSN("clickhouse://chime:pw@h:9000/db?dial_timeout=1s&password=pw"))
}
