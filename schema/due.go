package schema

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/chime-sched/chime/schema/chimev1"
)

// DuesOf is what a record of the due topic holds: the due events of its
// batch (the scheduler writes the dues it decided together as one record
// per partition), or the one it is.
func DuesOf(d *chimev1.Due) []*chimev1.Due {
	if b := d.GetBatch(); len(b) > 0 {
		return b
	}
	return []*chimev1.Due{d}
}

// DecodeDues decodes a record of the due topic into the due events it
// holds (DuesOf), as UnmarshalInternal and DuesOf would: a batch of n dues
// in one allocation of their trees where the generated decoder makes a
// dozen each. On error it returns what DuesOf returns for the generated
// decoder's partial decode, with its error.
//
// The dues of a batch share that allocation, so it lives until the last
// of them is let go: a record's worth of decoded dues (the scheduler
// bounds a batch record at half of MaxRecordBytes), decided together and due
// together, whose record is not committed before they all end anyway.
func DecodeDues(data []byte) ([]*chimev1.Due, error) {
	n, batchOnly := 0, true
	for b := data; len(b) > 0; {
		num, typ, _, rest, err := NextField(b)
		if err != nil {
			return decodeDuesSlow(data)
		}
		b = rest
		if num == dueBatchField && typ == protowire.BytesType {
			n++
		} else {
			batchOnly = false
		}
	}
	if !batchOnly || n == 0 {
		t := new(dueTree)
		presetDue(t, data)
		if err := t.due.UnmarshalVT(data); err != nil {
			return decodeDuesSlow(data)
		}
		return DuesOf(&t.due), nil
	}
	// A record of the scheduler's: its batch and nothing else.
	trees := make([]dueTree, n)
	dues := make([]*chimev1.Due, 0, n)
	for b := data; len(b) > 0; {
		_, _, v, rest, _ := NextField(b)
		b = rest
		t := &trees[len(dues)]
		presetDue(t, v)
		if err := t.due.UnmarshalVT(v); err != nil {
			return decodeDuesSlow(data)
		}
		dues = append(dues, &t.due)
	}
	return dues, nil
}

func decodeDuesSlow(data []byte) ([]*chimev1.Due, error) {
	d := new(chimev1.Due)
	err := UnmarshalInternal(data, d)
	return DuesOf(d), err
}
