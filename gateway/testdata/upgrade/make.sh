#!/bin/sh
# make.sh VERSION COMMIT: writes the upgrade fixtures of release VERSION
# (gateway/testdata/upgrade/VERSION/) with the comm binary built from
# COMMIT, on SQLite and on PostgreSQL. Run it from anywhere in the
# repository; it needs git, go, pg_dump and a PostgreSQL server whose URL
# (a maintenance database; a fixture database is created beside it and
# dropped) is COMM_FIXTURE_DATABASE_URL, by default the local one.
set -eu
if [ $# -ne 2 ]; then
	echo "usage: $0 VERSION COMMIT" >&2
	exit 2
fi
version=$1
commit=$(git rev-parse --short=12 "$2^{commit}")
pg=${COMM_FIXTURE_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$tmp/src" 2>/dev/null; rm -rf "$tmp"' EXIT
git -C "$root" worktree add --detach "$tmp/src" "$commit" >/dev/null
(cd "$tmp/src" && go build -o "$tmp/comm" ./cmd/comm)
cd "$root"
rm -rf "gateway/testdata/upgrade/$version"
go run ./gateway/testdata/upgrade/make.go -comm "$tmp/comm" -version "$version" -commit "$commit" -pg "$pg"
du -ah "gateway/testdata/upgrade/$version"
