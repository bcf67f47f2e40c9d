package channels

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// MemState is a State in this process's memory: for tests, and for
// adapters given no State (their facts then last as long as the process).
type MemState struct {
	mu sync.Mutex
	m  map[string][]byte
}

// Get returns key's value, or nil.
func (s *MemState) Get(_ context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.m[key]), nil
}

// Put sets key's value (nil deletes it).
func (s *MemState) Put(_ context.Context, key string, value []byte) error {
	if len(value) > MaxStateBytes {
		return fmt.Errorf("state %s: %d bytes (at most %d)", key, len(value), MaxStateBytes)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	if value == nil {
		delete(s.m, key)
	} else {
		s.m[key] = slices.Clone(value)
	}
	return nil
}
