package delivery

import "sync"

// leased is the leased work running on this replica (webhook endpoints,
// provider sessions): one goroutine per item, known by its id, so a claim
// skips what runs here already.
type leased struct {
	mu      sync.Mutex
	running map[string]bool
	wg      sync.WaitGroup
}

func newLeased() *leased { return &leased{running: map[string]bool{}} }

// has reports whether id runs here.
func (l *leased) has(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.running[id]
}

// start runs fn for id in a goroutine of its own.
func (l *leased) start(id string, fn func()) {
	l.mu.Lock()
	l.running[id] = true
	l.mu.Unlock()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		fn()
		l.mu.Lock()
		delete(l.running, id)
		l.mu.Unlock()
	}()
}

// wait returns once every item started has returned.
func (l *leased) wait() { l.wg.Wait() }
