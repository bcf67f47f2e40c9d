package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// CursorStore keeps Listen's cursor across restarts: the seq up to which
// every event has been handled.
type CursorStore interface {
	// Load returns the saved cursor, or 0 when none was saved.
	Load(ctx context.Context) (int64, error)
	// Save records the cursor. Listen calls it from one goroutine at a
	// time, with increasing values.
	Save(ctx context.Context, seq int64) error
}

// DefaultCursorFile is the file of Listen's default cursor store, in the
// working directory.
const DefaultCursorFile = ".comm-cursor"

// FileCursorStore keeps the cursor in a small JSON file
// ({"project_id":"proj_...","seq":42}), replaced atomically (write, fsync,
// rename) at each save. One listener at a time may use a file.
type FileCursorStore struct {
	// Path is the file's path.
	Path string
	// ProjectID, if set, is recorded in the file, and Load refuses a file
	// of another project: a cursor of one project would skip events of
	// another. Listen sets it for the stores it makes (WithCursorFile and
	// the default).
	ProjectID string

	mu sync.Mutex
}

var _ CursorStore = (*FileCursorStore)(nil)

// NewFileCursorStore returns a store keeping the cursor at path.
func NewFileCursorStore(path string) *FileCursorStore { return &FileCursorStore{Path: path} }

type cursorFile struct {
	ProjectID string `json:"project_id,omitempty"`
	Seq       int64  `json:"seq"`
}

// Load reads the cursor; a missing file is cursor 0. A file holding just
// a number is accepted too.
func (s *FileCursorStore) Load(context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := os.ReadFile(s.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("comm: cursor file: %w", err)
	}
	b = bytes.TrimSpace(b)
	if n, err := strconv.ParseInt(string(b), 10, 64); err == nil && n >= 0 {
		return n, nil
	}
	var f cursorFile
	if err := json.Unmarshal(b, &f); err != nil || f.Seq < 0 {
		return 0, fmt.Errorf("comm: cursor file %s: want {\"project_id\":...,\"seq\":N}: %q", s.Path, b)
	}
	if s.ProjectID != "" && f.ProjectID != "" && f.ProjectID != s.ProjectID {
		return 0, fmt.Errorf("comm: cursor file %s belongs to project %s, but the API key is of project %s: "+
			"delete the file to start this project from its beginning, or use another cursor file", s.Path, f.ProjectID, s.ProjectID)
	}
	return f.Seq, nil
}

// Save replaces the file atomically with the new cursor.
func (s *FileCursorStore) Save(_ context.Context, seq int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, _ := json.Marshal(cursorFile{ProjectID: s.ProjectID, Seq: seq})
	b = append(b, '\n')
	dir := filepath.Dir(s.Path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(s.Path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("comm: save cursor: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("comm: save cursor: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("comm: save cursor: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("comm: save cursor: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.Path); err != nil {
		return fmt.Errorf("comm: save cursor: %w", err)
	}
	if d, err := os.Open(dir); err == nil { // make the rename durable
		d.Sync()
		d.Close()
	}
	return nil
}
