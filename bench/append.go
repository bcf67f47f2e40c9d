package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// CreateProjects makes n bare projects for load.
func CreateProjects(ctx context.Context, l *stream.Log, n int) ([]string, error) {
	ids := make([]string, n)
	for i := range ids {
		id := ident.New(ident.Project)
		ids[i] = id
		_, err := l.Write(tenant.WithProject(ctx, id), id, func(tx *stream.Tx) error {
			return tx.Client().Project.Create().SetID(id).SetName(fmt.Sprint("bench ", i)).
				SetCustomerID(ident.New(ident.Customer)).SetAgentID(ident.New(ident.Agent)).Exec(tx.Context())
		})
		if err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// Appends runs `workers` goroutines appending one event per call, each to
// projects[i % len(projects)], for d, and reports throughput and latency.
func Appends(ctx context.Context, l *stream.Log, projects []string, workers int, d time.Duration) (Result, error) {
	raw, _ := json.Marshal(payload(1))
	data := json.RawMessage(raw)
	r, err := load(workers, d, func(w int) func() error {
		p := projects[w%len(projects)]
		return func() error {
			_, err := l.Append(ctx, p, stream.MessageReceived, data)
			return err
		}
	})
	r.Note = fmt.Sprintf("%d projects, %d concurrent appenders", len(projects), workers)
	return r, err
}

// Fill appends n events to project quickly (1,000 per transaction), for
// read benchmarks.
func Fill(ctx context.Context, l *stream.Log, project string, n int) error {
	raw, _ := json.Marshal(payload(1))
	const per = 1000
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	sem := make(chan struct{}, 8)
	for done := 0; done < n; done += per {
		k := min(per, n-done)
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, err := l.Write(ctx, project, func(tx *stream.Tx) error {
				for range k {
					if err := tx.Append(stream.MessageReceived, json.RawMessage(raw)); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// EngineName names the engine of cfg for tables.
func EngineName(cfg store.Config) string {
	if cfg.URL != "" {
		return "postgres"
	}
	if cfg.SQLiteSync == "normal" {
		return "sqlite (sync=normal)"
	}
	return "sqlite"
}
