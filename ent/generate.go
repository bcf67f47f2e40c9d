// Package ent holds the generated data layer; the hand-written schema is in
// ent/schema. Run `go generate ./ent` after changing it: it regenerates this
// package, ../ent.graphql (the ent half of the GraphQL schema) and, through
// gqlgen, the GraphQL executor in ../graph.
package ent

//go:generate go run -mod=mod entc.go
//go:generate sh -c "cd .. && go run -mod=mod github.com/99designs/gqlgen generate --config gqlgen.yml"
