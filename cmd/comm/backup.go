package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/comm-gateway/comm/store"
)

const backupAbout = `Writes a consistent copy of the gateway's SQLite database (DATA_DIR/comm.db) to
DEST, while gateways keep serving from it: SQLite's online backup API reads the
database as of one commit, without blocking the gateway's writes. DEST is one
file, checked with PRAGMA integrity_check before it is put in place.

The secrets sealed in the database (webhook signing secrets, provider tokens)
open only with the encryption key (COMM_ENCRYPTION_KEY, or DATA_DIR/encryption.key
when that is not set): keep the key too, apart from the backups.

On PostgreSQL (--database-url) it prints the pg_dump command to run instead.`

const restoreAbout = `Puts a backup made by comm backup in place as DATA_DIR/comm.db. It refuses
while a gateway has that database open, and replaces an existing database only
with --force (the old one is moved aside to comm.db.before-restore-<time>). The
backup is checked first: PRAGMA integrity_check, foreign_key_check and comm's
tables. Start comm serve on the data dir afterwards; it brings an older
backup's schema up to date.

On PostgreSQL (--database-url) it prints the pg_restore command to run instead.`

// backupCmd is comm backup DEST.
func backupCmd(f *flagSet, args []string) error {
	dataDir, dbURL, force := storeFlags(f, "replace DEST if it exists")
	if err := f.parse(args, 1, "the backup file to write"); err != nil {
		return err
	}
	dest := f.positional[0]
	if *dbURL != "" {
		cmd, err := pgCommand("pg_dump --format=custom --file="+shellQuote(dest), *dbURL, true)
		if err != nil {
			return cliError{exitUsage, err}
		}
		return cliError{exitFailed, fmt.Errorf("the database is PostgreSQL: back it up with pg_dump (a consistent snapshot; the gateways keep serving):\n\n  %s\n\n%s", cmd, pgPasswordNote)}
	}
	ctx, cancel := signalContext()
	defer cancel()
	info, err := store.BackupSQLite(ctx, *dataDir, dest, *force)
	if err != nil {
		return err
	}
	fmt.Printf("comm: backed up %s to %s (%s in %s)\n", info.Source, dest, byteSize(info.Bytes), info.Took.Round(1e6))
	if os.Getenv("COMM_ENCRYPTION_KEY") == "" {
		if _, err := os.Stat(filepath.Join(*dataDir, "encryption.key")); err == nil {
			fmt.Printf("comm: the sealed secrets in it open only with %s: keep a copy of that key, apart from the backups\n",
				filepath.Join(*dataDir, "encryption.key"))
		}
	}
	return nil
}

// restoreCmd is comm restore SRC.
func restoreCmd(f *flagSet, args []string) error {
	dataDir, dbURL, force := storeFlags(f, "replace the data dir's database (it is moved aside, not deleted)")
	if err := f.parse(args, 1, "the backup file to restore"); err != nil {
		return err
	}
	src := f.positional[0]
	if *dbURL != "" {
		cmd, err := pgCommand("pg_restore --clean --if-exists --no-owner --single-transaction", *dbURL, false)
		if err != nil {
			return cliError{exitUsage, err}
		}
		return cliError{exitFailed, fmt.Errorf("the database is PostgreSQL: restore a dump of it (pg_dump --format=custom) with pg_restore, the gateways stopped:\n\n  %s %s\n\n%s", cmd, shellQuote(src), pgPasswordNote)}
	}
	ctx, cancel := signalContext()
	defer cancel()
	info, err := store.RestoreSQLite(ctx, src, *dataDir, *force)
	if errors.Is(err, store.ErrInUse) {
		return cliError{exitFailed, err}
	}
	if err != nil {
		return err
	}
	if info.Previous != "" {
		fmt.Printf("comm: moved the database that was there to %s\n", info.Previous)
	}
	fmt.Printf("comm: restored %s to %s; start comm serve with --data-dir %s\n", src, info.Path, *dataDir)
	return nil
}

// storeFlags declares the flags that choose the database, as serve has
// them, and --force.
func storeFlags(f *flagSet, force string) (dataDir, dbURL *string, forced *bool) {
	dataDir = f.String("data-dir", "COMM_DATA_DIR", "./comm-data", "directory of the SQLite database (as comm serve has it)")
	dbURL = f.String("database-url", "COMM_DATABASE_URL", "", "postgres:// URL of the gateway's database, if it runs on PostgreSQL (as comm serve has it)")
	forced = f.Bool("force", "", false, force)
	return
}

const pgPasswordNote = "The password is left out: give it in PGPASSWORD or ~/.pgpass."

// pgCommand is a pg_dump or pg_restore command line (prefix, then the
// connection) for the gateway's database URL, without its password. The
// URL's query keeps libpq's parameters; search_path (a schema, which
// libpq does not take in a URL) becomes --schema when withSchema (pg_dump:
// a dump of that schema, which pg_restore then restores whole).
func pgCommand(prefix, rawURL string, withSchema bool) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", errors.New("--database-url must be postgres:// or postgresql://")
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	q := u.Query()
	var schema string
	keep := url.Values{}
	for k, v := range q {
		switch k {
		case "search_path":
			schema = strings.TrimSpace(strings.Split(v[0], ",")[0])
		case "sslmode", "sslcert", "sslkey", "sslrootcert", "sslsni", "connect_timeout", "application_name",
			"options", "target_session_attrs", "host", "port", "dbname", "user", "service", "passfile":
			keep[k] = v
		}
	}
	u.RawQuery = keep.Encode()
	args := []string{prefix}
	if schema != "" && withSchema {
		args = append(args, "--schema="+shellQuote(schema))
	}
	args = append(args, "--dbname="+shellQuote(u.String()))
	return strings.Join(args, " "), nil
}

// shellQuote quotes s for a POSIX shell where it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@,+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// byteSize is n in B, KiB, MiB or GiB.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 2 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMG"[i])
}
