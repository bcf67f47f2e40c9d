package netguard

import (
	"fmt"
	"io"
	"net/http"
)

// BodyPrefix is how much of a receiver's response body is worth reading: enough
// to log a short diagnostic, never the whole of an arbitrarily large body.
const BodyPrefix = 4 << 10

// ReadLimited reads at most n bytes from r and returns them; it never asks r
// for more than n bytes in total, so whatever follows is left unread. A body
// longer than n is not an error: the prefix is returned. n <= 0 reads nothing.
func ReadLimited(r io.Reader, n int64) ([]byte, error) {
	if n <= 0 {
		return []byte{}, nil
	}
	b, err := io.ReadAll(io.LimitReader(r, n))
	if err != nil {
		return b, fmt.Errorf("netguard: read body: %w", err)
	}
	return b, nil
}

// ReadBody reads at most n bytes of resp.Body with [ReadLimited] and closes
// the body, discarding the rest unread. When the body was longer than n the
// connection is not reused, which costs a new connection but never a huge read.
func ReadBody(resp *http.Response, n int64) ([]byte, error) {
	defer resp.Body.Close()
	return ReadLimited(resp.Body, n)
}
