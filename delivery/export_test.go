package delivery

// Abandon makes Run stop as if the process died: its leases are kept
// until they lapse.
func (d *Sessions) Abandon() { d.abandon.Store(true) }

// Abandon makes Run stop as if the process died: its leases are kept
// until they lapse, and an acknowledgement in flight is not recorded.
func (d *Webhooks) Abandon() { d.abandon.Store(true) }
