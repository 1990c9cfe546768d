package schema

import "github.com/chime-sched/chime/schema/chimev1"

// DuesOf is what a record of the due topic holds: the due events of its
// batch (the scheduler writes the dues it decided together as one record
// per partition), or the one it is.
func DuesOf(d *chimev1.Due) []*chimev1.Due {
	if b := d.GetBatch(); len(b) > 0 {
		return b
	}
	return []*chimev1.Due{d}
}
