package messaging

import (
	"sync"
	"unicode"

	"github.com/comm-gateway/comm/channels"
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

// adapterSet holds the provisioned adapters of this process.
type adapterSet struct {
	mu sync.Mutex
	m  map[string]channels.Adapter
}

func (a *adapterSet) get(id string) (channels.Adapter, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.m[id]
	return v, ok
}

func (a *adapterSet) put(id string, v channels.Adapter) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]channels.Adapter{}
	}
	a.m[id] = v
}

func (a *adapterSet) putIfAbsent(id string, v channels.Adapter) channels.Adapter {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]channels.Adapter{}
	}
	if old, ok := a.m[id]; ok {
		if c, ok := v.(channels.Closer); ok {
			c.Close()
		}
		return old
	}
	a.m[id] = v
	return v
}

func (a *adapterSet) take(id string) (channels.Adapter, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.m[id]
	delete(a.m, id)
	return v, ok
}
