package stream

import "sync"

// Hub wakes readers in this process after a project's events commit.
// Wake-ups are hints: a woken reader re-reads the log from its own cursor,
// so a missed or spurious wake-up costs latency, never data.
type Hub struct {
	mu     sync.Mutex
	topics map[string]*topic

	sigMu   sync.Mutex
	signals map[string]map[*func(string)]struct{}
}

type topic struct {
	head     int64
	ch       chan struct{}
	watchers int
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{topics: make(map[string]*topic)} }

// Publish records that project's stream now reaches head and wakes its
// watchers.
func (h *Hub) Publish(project string, head int64) {
	h.mu.Lock()
	t := h.topics[project]
	if t != nil && head > t.head {
		t.head = head
		close(t.ch)
		t.ch = make(chan struct{})
	}
	h.mu.Unlock()
}

// Watch registers interest in project until the watcher is closed.
func (h *Hub) Watch(project string) *Watcher {
	h.mu.Lock()
	t := h.topics[project]
	if t == nil {
		t = &topic{ch: make(chan struct{})}
		h.topics[project] = t
	}
	t.watchers++
	h.mu.Unlock()
	return &Watcher{hub: h, project: project, t: t}
}

// Watcher follows one project's commits.
type Watcher struct {
	hub     *Hub
	project string
	t       *topic
	closed  bool
}

// C returns a channel closed at the project's next commit. Take it before
// reading the log, then wait on it: a commit in between closes it at once.
func (w *Watcher) C() <-chan struct{} {
	w.hub.mu.Lock()
	defer w.hub.mu.Unlock()
	return w.t.ch
}

// Close stops watching.
func (w *Watcher) Close() {
	w.hub.mu.Lock()
	defer w.hub.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	w.t.watchers--
	if w.t.watchers == 0 {
		delete(w.hub.topics, w.project)
	}
}

// Signals are hints other than commits ("key K was revoked"), announced
// with Log.Signal to this process and, on PostgreSQL, to the other
// replicas. Like wake-ups they are hints: a listener re-reads the database.

// OnSignal calls fn with the value of every signal of kind until the
// returned function is called. fn runs on the announcer's goroutine and
// must not block.
func (h *Hub) OnSignal(kind string, fn func(value string)) (cancel func()) {
	h.sigMu.Lock()
	defer h.sigMu.Unlock()
	if h.signals == nil {
		h.signals = map[string]map[*func(string)]struct{}{}
	}
	if h.signals[kind] == nil {
		h.signals[kind] = map[*func(string)]struct{}{}
	}
	h.signals[kind][&fn] = struct{}{}
	return func() {
		h.sigMu.Lock()
		defer h.sigMu.Unlock()
		delete(h.signals[kind], &fn)
	}
}

// signal calls the listeners of kind.
func (h *Hub) signal(kind, value string) {
	h.sigMu.Lock()
	fns := make([]func(string), 0, len(h.signals[kind]))
	for fn := range h.signals[kind] {
		fns = append(fns, *fn)
	}
	h.sigMu.Unlock()
	for _, fn := range fns {
		fn(value)
	}
}
