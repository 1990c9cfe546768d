package sink

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// commitResponseErr is the first per-partition error of a commit.
func commitResponseErr(resp *kmsg.OffsetCommitResponse) error {
	if resp == nil {
		return nil
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return err
			}
		}
	}
	return nil
}
