package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// TestReleaseRecorded: a database remembers the latest release that
// opened it; an earlier release refuses to start on it, saying which
// release to run, and a later one (or none: tests, tools) opens it.
func TestReleaseRecorded(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		t.Parallel()
		open := func(release string) error {
			t.Helper()
			c := cfg
			c.Release = release
			db, err := store.Open(context.Background(), c)
			if err == nil {
				db.Close()
			}
			return err
		}
		refused := func(release, recorded string) {
			t.Helper()
			err := open(release)
			if !errors.Is(err, store.ErrNewerDatabase) {
				t.Fatalf("open with %s after %s: %v, want ErrNewerDatabase", release, recorded, err)
			}
			for _, s := range []string{"comm " + recorded + " last opened it", "this is comm " + release, "run comm " + recorded + " or later"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		}
		for _, r := range []string{"0.5.0", "0.5.0", ""} {
			if err := open(r); err != nil {
				t.Fatalf("open with %q: %v", r, err)
			}
		}
		refused("0.4.0", "0.5.0")
		refused("0.5.0-dev", "0.5.0")
		if err := open("0.5.1"); err != nil {
			t.Fatal(err)
		}
		refused("0.5.0", "0.5.1")
		// Not a release number (a -ldflags override): nothing is checked.
		if err := open("custom"); err != nil {
			t.Fatalf("open with a custom version: %v", err)
		}
		refused("0.5.0", "0.5.1")
	})
}
