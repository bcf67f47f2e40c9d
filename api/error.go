package api

// ErrorBody is the one JSON shape of every REST error answer.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong.
type ErrorDetail struct {
	// Code is machine-readable ("not_found", "invalid_parameter" ...).
	Code string `json:"code"`
	// Message is the human-readable explanation.
	Message string `json:"message"`
	// Param names the offending request parameter or field, if any.
	Param string `json:"param,omitempty"`
	// EarliestSeq, on cursor_expired, is the seq of the earliest event
	// the stream still keeps: resume from EarliestSeq-1 or later.
	EarliestSeq int64 `json:"earliest_seq,omitempty"`
	// RequestID identifies the request in the gateway's log.
	RequestID string `json:"request_id,omitempty"`
}
