package messaging

import (
	"sync"

	"github.com/comm-gateway/comm/channels"
)

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
