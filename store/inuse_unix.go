//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package store

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// sqliteHolder returns the id of a process that holds a lock on the SQLite
// database at path, 0 when none does. SQLite's unix VFS (whose lock bytes
// are part of the file format, so that every version interoperates)
// holds a read lock on the dead-man-switch byte of the -shm file for as
// long as a connection in WAL mode has the database open, and locks bytes
// of the database file itself during transactions; F_GETLK asks the
// kernel who holds a lock without taking one.
func sqliteHolder(path string) (int, error) {
	for _, c := range []struct {
		file       string
		start, len int64
	}{
		// The wal-index locks (bytes 120 to 127) and the dead-man switch
		// (128) of the -shm file.
		{path + "-shm", 120, 9},
		// The database file: its lock bytes lie at 1 GiB; len 0 is to the
		// end of any file.
		{path, 0, 0},
	} {
		f, err := os.Open(c.file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: c.start, Len: c.len}
		err = syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk)
		f.Close()
		if err != nil {
			return 0, err
		}
		if lk.Type != syscall.F_UNLCK {
			return int(lk.Pid), nil
		}
	}
	return 0, nil
}
