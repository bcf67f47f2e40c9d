package stream

import "sync"

// Hub wakes readers in this process after a project's events commit.
// Wake-ups are hints: a woken reader re-reads the log from its own cursor,
// so a missed or spurious wake-up costs latency, never data.
type Hub struct {
	mu     sync.Mutex
	topics map[string]*topic
	kept   int // bytes of the events all topics keep, at most maxKeptTotal

	sigMu   sync.Mutex
	signals map[string]map[*func(string)]struct{}
}

type topic struct {
	head     int64
	ch       chan struct{}
	watchers int
	// keepers counts the watchers that read new events from memory
	// (FollowEvents); while there are some, the topic keeps its latest
	// committed events, recent: consecutive, ending at head, at most
	// maxKeptEvents and maxKeptBytes (keptBytes).
	keepers   int
	recent    []Envelope
	keptBytes int
}

// Bounds of the events the hub keeps in memory for FollowEvents: per
// project, and in all.
const (
	maxKeptEvents = 256
	maxKeptBytes  = 256 << 10
	maxKeptTotal  = 32 << 20
)

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{topics: make(map[string]*topic)} }

// Publish records that project's stream now reaches head and wakes its
// watchers.
func (h *Hub) Publish(project string, head int64) { h.publish(project, head, nil) }

// keeps reports whether project's committed events are wanted in memory
// (a FollowEvents follower is watching it).
func (h *Hub) keeps(project string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[project]
	return t != nil && t.keepers > 0
}

// publish is Publish with the events just committed, envs (consecutive,
// the last at head), which the topic keeps if it keeps events. Without
// them (a commit announced by another replica), or after a gap, it keeps
// nothing until the next commit whose events it is given.
func (h *Hub) publish(project string, head int64, envs []Envelope) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[project]
	if t == nil || head <= t.head {
		return
	}
	if t.keepers > 0 {
		complete := len(envs) > 0 && envs[len(envs)-1].Seq == head
		if !complete || len(t.recent) == 0 || t.recent[len(t.recent)-1].Seq != envs[0].Seq-1 {
			h.forget(t, len(t.recent)) // the events before these are not known
		}
		if complete {
			for _, e := range envs {
				if h.kept+len(e.Body) > maxKeptTotal {
					h.forget(t, len(t.recent)) // no room: this commit's are read from the database
					break
				}
				t.recent = append(t.recent, e)
				t.keptBytes += len(e.Body)
				h.kept += len(e.Body)
			}
			// Oldest first out, within the topic's bounds.
			n := 0
			for len(t.recent)-n > maxKeptEvents || (t.keptBytes > maxKeptBytes && n < len(t.recent)) {
				t.keptBytes -= len(t.recent[n].Body)
				h.kept -= len(t.recent[n].Body)
				n++
			}
			if n > 0 {
				// Dropped in place (append moves what is left when the
				// array fills): no copy per commit.
				clear(t.recent[:n])
				t.recent = t.recent[n:]
			}
		}
	}
	t.head = head
	close(t.ch)
	t.ch = make(chan struct{})
}

// forget drops the first n events the topic keeps; called with h.mu held.
func (h *Hub) forget(t *topic, n int) {
	for _, e := range t.recent[:n] {
		t.keptBytes -= len(e.Body)
		h.kept -= len(e.Body)
	}
	if n == len(t.recent) {
		t.recent = nil
		return
	}
	clear(t.recent[:n])
	t.recent = t.recent[n:]
}

// since returns project's events after afterSeq up to the head known to
// the hub, if it keeps all of them (ok); nil and ok when there are none.
func (h *Hub) since(project string, afterSeq int64) (envs []Envelope, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[project]
	if t == nil {
		return nil, false
	}
	if afterSeq >= t.head {
		return nil, true
	}
	if len(t.recent) == 0 || t.recent[0].Seq > afterSeq+1 || t.recent[len(t.recent)-1].Seq != t.head {
		return nil, false
	}
	i := int(afterSeq + 1 - t.recent[0].Seq)
	return append([]Envelope(nil), t.recent[i:]...), true
}

// Watch registers interest in project until the watcher is closed.
func (h *Hub) Watch(project string) *Watcher { return h.watch(project, false) }

func (h *Hub) watch(project string, keep bool) *Watcher {
	h.mu.Lock()
	t := h.topics[project]
	if t == nil {
		t = &topic{ch: make(chan struct{})}
		h.topics[project] = t
	}
	t.watchers++
	if keep {
		t.keepers++
	}
	h.mu.Unlock()
	return &Watcher{hub: h, project: project, t: t, keep: keep}
}

// Watcher follows one project's commits.
type Watcher struct {
	hub     *Hub
	project string
	t       *topic
	keep    bool
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
	if w.keep {
		w.t.keepers--
		if w.t.keepers == 0 {
			w.hub.forget(w.t, len(w.t.recent))
		}
	}
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
