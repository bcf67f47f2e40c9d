package messaging

import (
	"time"
	"unicode"

	"github.com/comm-gateway/comm/ident"
)

// Paging of list endpoints.
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 500
)

// Page selects a page of a list: items with an id after After, oldest
// first. Ids are time-ordered, so the last id of a page is the cursor of
// the next.
type Page struct {
	After string
	Limit int
}

// Validate fills the default limit and checks the page of a list of ids
// with the given prefix.
func (pg *Page) Validate(prefix string) error { return pg.validate(prefix) }

func (pg *Page) validate(prefix string) error {
	if pg.Limit == 0 {
		pg.Limit = DefaultPageLimit
	}
	if pg.Limit < 1 || pg.Limit > MaxPageLimit {
		return Invalid("limit", "must be between 1 and %d", MaxPageLimit)
	}
	if pg.After != "" {
		if err := ident.Check(pg.After, prefix); err != nil {
			return Invalid("after", "%v", err)
		}
	}
	return nil
}

func isControl(r rune) bool { return unicode.IsControl(r) }

// utcPtr returns *t in UTC, or nil.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
