// Package ent holds the generated data layer; the hand-written schema is in
// ent/schema. Run `go generate ./ent` after changing it.
package ent

//go:generate go run -mod=mod entgo.io/ent/cmd/ent generate --feature intercept,sql/upsert,sql/execquery ./schema
