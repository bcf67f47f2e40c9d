// Command comm is the gateway (comm serve) and its tools.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/joho/godotenv"
)

const usage = `comm: a self-hostable messaging gateway for AI agents

Usage:
  comm serve [flags]     run the gateway
  comm bench [flags]     measure the event log and the HTTP API
  comm help              show this text

Run "comm COMMAND --help" for a command's flags.
`

func main() {
	if err := loadDotEnv(".env"); err != nil {
		fmt.Fprintln(os.Stderr, "comm:", err)
		os.Exit(2)
	}
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "serve":
		err = serve(args)
	case "bench":
		err = runBench(args)
	case "help", "-h", "--help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "comm: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "comm:", err)
		os.Exit(1)
	}
}

// usageError is a flag error already reported by the flag package.
type usageError struct{ error }

// loadDotEnv reads KEY=value lines from path into the environment, without
// overriding variables that are already set. A missing file is fine.
func loadDotEnv(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := godotenv.Load(path); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return nil
}
