package analytics

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// MigrateTo applies the migrations up to version, without retention
// changes: a database as an older chime left it.
func MigrateTo(ctx context.Context, conn driver.Conn, version uint32) error {
	days, err := retentionDays(0)
	if err != nil {
		return err
	}
	return migrateTo(ctx, conn, days, version)
}
