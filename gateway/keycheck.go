package gateway

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/comm-gateway/comm/sealed"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// keyCheckID is the provider_states row holding the check value of the
// encryption key the database's secrets are sealed with.
const keyCheckID = "gateway/encryption-key-check"

// ErrKeyMismatch is the error of CheckKey (and New) when the encryption
// key is not the one the database was first used with: this gateway could
// not open the secrets the others sealed (webhook signing secrets,
// provider credentials), so it must not run beside them.
var ErrKeyMismatch = errors.New("the encryption key does not match the one this database's secrets are sealed with " +
	"(the check value the first gateway on this database recorded): every replica of one database needs the same key; " +
	"set --encryption-key (COMM_ENCRYPTION_KEY) to the key the other replicas use")

// keyCheckValue is what the database keeps of box's key: an HMAC of a
// fixed label under a key derived for this purpose alone, which reveals
// nothing of the encryption key or of the keys derived for other purposes.
func keyCheckValue(box *sealed.Box) []byte {
	m := hmac.New(sha256.New, box.DeriveKey("encryption key check"))
	m.Write([]byte("comm encryption key check v1"))
	return m.Sum(nil)
}

// CheckKey records the check value of box's key in the database if none
// is recorded yet (the first start), and otherwise compares it: a
// different key is ErrKeyMismatch. Replicas starting together on a fresh
// database agree on the first value written.
func CheckKey(ctx context.Context, log *stream.Log, box *sealed.Box) error {
	want := keyCheckValue(box)
	var got []byte
	_, err := log.Write(tenant.System(ctx), keyCheckID, func(tx *stream.Tx) error {
		got = nil
		if _, err := tx.Exec(tx.Rebind(`INSERT INTO provider_states (id, value, updated_at) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING`),
			keyCheckID, want, time.Now().UTC()); err != nil {
			return err
		}
		rows, err := tx.Query(tx.Rebind(`SELECT value FROM provider_states WHERE id = ?`), keyCheckID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := rows.Scan(&got); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	if err != nil {
		return fmt.Errorf("gateway: encryption key check: %w", err)
	}
	if !hmac.Equal(got, want) {
		return ErrKeyMismatch
	}
	return nil
}

// verifyKey compares the recorded check value with box's key without
// writing: what /readyz runs.
func verifyKey(ctx context.Context, log *stream.Log, box *sealed.Box) error {
	db := log.DB()
	var got []byte
	if err := db.R.QueryRowContext(ctx, db.Rebind(`SELECT value FROM provider_states WHERE id = ?`), keyCheckID).Scan(&got); err != nil {
		return fmt.Errorf("encryption key check: %w", err)
	}
	if !hmac.Equal(got, keyCheckValue(box)) {
		return ErrKeyMismatch
	}
	return nil
}
