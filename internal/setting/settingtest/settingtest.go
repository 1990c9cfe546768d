// Package settingtest checks a part's Config validation the one way every
// part's tests do: each Config of a table is validated, a refused one is
// refused with exactly the expected message (naming the part and field),
// the part's constructor refuses it too before it connects to or opens
// anything, and an accepted one has its defaults applied.
package settingtest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Case is one configuration and the answer validation must give it: the
// error Err, or (Err "") acceptance, with what Check asserts of the
// configuration after validation (its defaults applied).
type Case[C any] struct {
	Name  string
	Cfg   C
	Err   string
	Check func(t *testing.T, c C) // nil: nothing more to check
}

// Validate runs cases in parallel. validate gets a copy of each Cfg;
// build (the part's New or Open) gets Cfg itself and must refuse what
// validate refuses, with the same error; nil skips that check.
func Validate[C any](t *testing.T, validate func(*C) error, build func(C) error, cases []Case[C]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			c := tc.Cfg
			err := validate(&c)
			if tc.Err != "" {
				require.EqualError(t, err, tc.Err)
				if build != nil {
					require.EqualError(t, build(tc.Cfg), tc.Err, "the constructor refuses it too")
				}
				return
			}
			require.NoError(t, err)
			if tc.Check != nil {
				tc.Check(t, c)
			}
		})
	}
}
