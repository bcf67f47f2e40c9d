//go:build ignore

// This program generates the ent data layer and, through entgql, the ent
// half of the GraphQL schema (ent.graphql). Run it with `go generate ./ent`.
package main

import (
	"log"

	"entgo.io/contrib/entgql"
	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"
)

func main() {
	ex, err := entgql.NewExtension(
		entgql.WithSchemaGenerator(),
		entgql.WithSchemaPath("../ent.graphql"),
		entgql.WithConfigPath("../gqlgen.yml"),
		entgql.WithWhereInputs(true),
	)
	if err != nil {
		log.Fatalf("entgql: %v", err)
	}
	err = entc.Generate("./schema", &gen.Config{
		Features: []gen.Feature{gen.FeatureIntercept, gen.FeatureUpsert, gen.FeatureExecQuery},
	}, entc.Extensions(ex))
	if err != nil {
		log.Fatalf("ent: %v", err)
	}
}
