package inbound

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"os"
)

// spoolMemory is how much of a message is held in memory; the rest of a
// larger message goes to a temporary file, so a 25 MB message costs its
// decoded parts in memory, not also its raw bytes.
const spoolMemory = 1 << 20

// spool holds a message being received, in memory up to spoolMemory and
// then in a temporary file, and hashes it on the way.
type spool struct {
	dir  string
	mem  bytes.Buffer
	f    *os.File
	n    int64
	hash hash.Hash
}

func newSpool(dir string) *spool { return &spool{dir: dir, hash: sha256.New()} }

func (s *spool) Write(p []byte) (int, error) {
	s.hash.Write(p)
	if s.f == nil && s.mem.Len()+len(p) > spoolMemory {
		f, err := os.CreateTemp(s.dir, "comm-mail-*")
		if err != nil {
			return 0, err
		}
		s.f = f
		if _, err := f.Write(s.mem.Bytes()); err != nil {
			return 0, err
		}
		s.mem = bytes.Buffer{}
	}
	var n int
	var err error
	if s.f != nil {
		n, err = s.f.Write(p)
	} else {
		n, err = s.mem.Write(p)
	}
	s.n += int64(n)
	return n, err
}

// reader reads the message from its start; each call gives a new reader.
func (s *spool) reader() io.Reader {
	if s.f != nil {
		return io.NewSectionReader(s.f, 0, s.n)
	}
	return bytes.NewReader(s.mem.Bytes())
}

// digest is the hex SHA-256 of the message.
func (s *spool) digest() string { return hex.EncodeToString(s.hash.Sum(nil)) }

// close removes the temporary file, if any.
func (s *spool) close() {
	if s.f != nil {
		name := s.f.Name()
		s.f.Close()
		os.Remove(name)
		s.f = nil
	}
}
