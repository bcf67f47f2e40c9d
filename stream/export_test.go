package stream

// HubTopics returns how many projects h holds watchers for.
func HubTopics(h *Hub) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.topics)
}

// HubKept returns the bytes of events h keeps in memory.
func HubKept(h *Hub) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.kept
}
