package stream

// HubTopics returns how many projects h holds watchers for.
func HubTopics(h *Hub) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.topics)
}
