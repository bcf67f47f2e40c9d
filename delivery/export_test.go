package delivery

// Abandon makes Run stop as if the process died: its leases are kept
// until they lapse.
func (d *Sessions) Abandon() { d.abandon.Store(true) }
