//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package store

import "errors"

// sqliteHolder cannot tell here whether a process has the database open.
func sqliteHolder(string) (int, error) {
	return 0, errors.New("cannot tell on this system whether a gateway has the database open")
}
