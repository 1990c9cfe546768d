// Package setting owns the rule every chime Config follows for its numeric
// settings: 0 (the zero value, what a caller that sets nothing passes)
// takes the setting's default; a negative or otherwise impossible value is
// refused with an error naming the setting, never quietly replaced. A
// setting that can be turned off says so with a named value of its own
// (scheduler.Off, quota.Unlimited), so that "off" is never a silent
// reading of a mistake.
//
// Each Config's validate() calls these for its fields and returns what
// they say joined (errors.Join): one start reports every bad setting.
package setting

import (
	"fmt"
	"math"
)

// Number is what a numeric setting holds: a count, a size, a
// time.Duration or a rate.
type Number interface {
	~int | ~int32 | ~int64 | ~uint32 | ~uint64 | ~float64
}

// Positive applies def to a setting left at 0 and refuses a negative one:
// "owner: field is -1: must be positive, or 0 for the default 4096".
func Positive[T Number](owner, field string, v *T, def T) error {
	if err := finite(owner, field, *v); err != nil {
		return err
	}
	switch {
	case *v == 0:
		*v = def
	case *v < 0:
		return fmt.Errorf("%s: %s is %v: must be positive, or 0 for the default %v", owner, field, *v, def)
	}
	return nil
}

// PositiveOr is Positive for a setting that also takes one named value,
// special (spelled specialName, for example "scheduler.Off"), which does
// what means says ("to turn redelivery off"). special is kept as it is.
func PositiveOr[T Number](owner, field string, v *T, def, special T, specialName, means string) error {
	if err := finite(owner, field, *v); err != nil {
		return err
	}
	switch {
	case *v == special:
	case *v == 0:
		*v = def
	case *v < 0:
		return fmt.Errorf("%s: %s is %v: must be positive, 0 for the default %v, or %s %s", owner, field, *v, def, specialName, means)
	}
	return nil
}

// AtLeast applies def to a setting left at 0 and refuses one below least
// (a bound below which the setting cannot work, not a preference).
func AtLeast[T Number](owner, field string, v *T, def, least T, why string) error {
	if err := Positive(owner, field, v, def); err != nil {
		return err
	}
	if *v < least {
		return fmt.Errorf("%s: %s is %v: must be at least %v (%s), or 0 for the default %v", owner, field, *v, least, why, def)
	}
	return nil
}

func finite[T Number](owner, field string, v T) error {
	if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("%s: %s is %v: must be a finite number", owner, field, v)
	}
	return nil
}
