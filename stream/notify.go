package stream

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lib/pq"
)

// Across replicas on PostgreSQL, commits are announced with NOTIFY on this
// channel. A notification only says "project P reaches seq N" (a hint, as
// in-process wake-ups are); readers re-read the database. Notifications are
// coalesced: at most one NOTIFY per coalesceWindow per replica, sent after
// commit, carrying every project that advanced.
const (
	notifyChannel  = "comm_events"
	coalesceWindow = 20 * time.Millisecond
	maxPayload     = 7000 // PostgreSQL refuses payloads of 8000 bytes or more
)

// A signal (Log.Signal) travels on the same channel as a line
// "!<kind> <value>"; replicas that do not know signals skip the line (its
// second field is not a seq).
const signalMark = "!"

// notifier batches the heads this replica committed, and its signals, and
// announces them.
type notifier struct {
	log     *Log
	logger  *slog.Logger
	mu      sync.Mutex
	pending map[string]int64
	signals []string // lines
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

func (n *notifier) note(project string, head int64) {
	n.mu.Lock()
	if head > n.pending[project] {
		n.pending[project] = head
	}
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

func (n *notifier) signal(kind, value string) {
	n.mu.Lock()
	n.signals = append(n.signals, signalMark+kind+" "+value+"\n")
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

func (n *notifier) run() {
	defer close(n.done)
	for {
		select {
		case <-n.stop:
			n.flush()
			return
		case <-n.kick:
		}
		n.flush()
		// Coalesce: whatever commits in the next window goes out together.
		select {
		case <-n.stop:
			n.flush()
			return
		case <-time.After(coalesceWindow):
		}
	}
}

func (n *notifier) flush() {
	n.mu.Lock()
	pending, signals := n.pending, n.signals
	n.pending, n.signals = map[string]int64{}, nil
	n.mu.Unlock()
	var b strings.Builder
	send := func() {
		if b.Len() == 0 {
			return
		}
		if _, err := n.log.db.W.ExecContext(context.Background(), "SELECT pg_notify($1, $2)", notifyChannel, b.String()); err != nil {
			n.logger.Warn("stream: notify", "err", err)
		}
		b.Reset()
	}
	add := func(line string) {
		if b.Len()+len(line) > maxPayload {
			send()
		}
		b.WriteString(line)
	}
	for _, line := range signals {
		add(line)
	}
	for p, head := range pending {
		add(p + " " + strconv.FormatInt(head, 10) + "\n")
	}
	send()
}

// listen turns other replicas' notifications into hub wake-ups.
func (l *Log) listen(logger *slog.Logger, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	ln := pq.NewListener(l.db.URL, time.Second, 30*time.Second, func(ev pq.ListenerEventType, err error) {
		if err != nil {
			logger.Warn("stream: listen", "event", ev, "err", err)
		}
	})
	defer ln.Close()
	if err := ln.Listen(notifyChannel); err != nil {
		logger.Warn("stream: listen", "err", err)
	}
	for {
		select {
		case <-stop:
			return
		case n := <-ln.Notify:
			if n == nil {
				continue // reconnected; feeds' own polling covers the gap
			}
			for _, line := range strings.Split(n.Extra, "\n") {
				p, h, ok := strings.Cut(line, " ")
				if !ok {
					continue
				}
				if kind, isSignal := strings.CutPrefix(p, signalMark); isSignal {
					l.hub.signal(kind, h)
					continue
				}
				if head, err := strconv.ParseInt(h, 10, 64); err == nil {
					l.hub.Publish(p, head)
				}
			}
		case <-time.After(time.Minute):
			go ln.Ping() //nolint:errcheck // keeps the connection checked
		}
	}
}

// Signal announces a hint of kind with value (no spaces or newlines) to
// the OnSignal listeners of this process at once and, on PostgreSQL, of the
// other replicas through NOTIFY, coalesced with the commits'
// notifications. Call it after the change it announces has committed.
func (l *Log) Signal(kind, value string) {
	l.hub.signal(kind, value)
	if l.notify != nil {
		l.notify.signal(kind, value)
	}
}
