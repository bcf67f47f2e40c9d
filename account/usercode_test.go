package account_test

import (
	"strings"
	"testing"

	"github.com/comm-gateway/comm/account"
)

// FuzzNormalizeUserCode: whatever a person types, a code is either refused
// or normalized to 8 letters of the alphabet, and normalizing is stable.
func FuzzNormalizeUserCode(f *testing.F) {
	for _, seed := range []string{"BCDF-GHJK", "bcdf ghjk", "BCDFGHJK", " b-c-d-f-g-h-j-k ", "AEIO-UAEI", "", "BCDF-GHJK-L", "ＢＣＤＦ-ＧＨＪＫ", "<script>", "bcdf\tghjk"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		norm, err := account.NormalizeUserCode(in)
		if err != nil {
			if norm != "" {
				t.Fatalf("refused %q but returned %q", in, norm)
			}
			return
		}
		if len(norm) != 8 || strings.Trim(norm, account.UserCodeAlphabet) != "" {
			t.Fatalf("%q normalized to %q", in, norm)
		}
		again, err := account.NormalizeUserCode(account.FormatUserCode(norm))
		if err != nil || again != norm {
			t.Fatalf("formatted %q does not normalize back: %q %v", norm, again, err)
		}
	})
}

func TestNormalizeUserCode(t *testing.T) {
	for in, want := range map[string]string{"bcdf-ghjk": "BCDFGHJK", "BCDF GHJK": "BCDFGHJK", "b c d f g h j k": "BCDFGHJK"} {
		if got, err := account.NormalizeUserCode(in); err != nil || got != want {
			t.Errorf("%q: %q %v", in, got, err)
		}
	}
	for _, in := range []string{"AEIO-UAEI", "BCDF-GHJ", "BCDF-GHJKB", "BCDF-GHJ1", "BCDF_GHJK"} {
		if _, err := account.NormalizeUserCode(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}
