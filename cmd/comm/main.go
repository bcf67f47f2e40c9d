// Command comm is the gateway (comm serve) and its tools.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/joho/godotenv"
)

const usage = `comm: a self-hostable messaging gateway for AI agents

Usage:
  comm serve [flags]              run the gateway
  comm sandbox [name]             create a sandbox project; write its key to .env
  comm connect CHANNEL            connect a channel (try: comm connect test)
  comm inject CONN_ID TEXT...     deliver a message into a test connection
  comm events [--follow]          print the event stream
  comm listen --exec CMD          answer every message with CMD's output
  comm reply MSG_ID TEXT...       reply to a message
  comm send --connection ID --to WHO TEXT...
  comm webhook set URL | get | delete | replay --from-seq N | attempts
  comm login                      sign in through the browser; upgrade the key in .env
  comm account                    the signed-in account: balance, ledger, projects
  comm keys [list] | create [--name N] | revoke ID
                                  list, make (shown once) or revoke the project's keys
  comm bench [flags]              measure the gateway on this machine
  comm help                       show this text

Client commands read COMM_API_KEY and COMM_BASE_URL from the environment or
.env, print text (or JSON with --json), and exit 0 on success, 1 when the
gateway refused or could not be reached, 2 on bad usage, 3 when no key is
configured.

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
	case "sandbox":
		err = sandboxCmd(args)
	case "connect":
		err = connectCmd(args)
	case "inject":
		err = injectCmd(args)
	case "events":
		err = eventsCmd(args)
	case "listen":
		err = listenCmd(args)
	case "reply":
		err = replyCmd(args)
	case "send":
		err = sendCmd(args)
	case "webhook":
		err = webhookCmd(args)
	case "login":
		err = loginCmd(args)
	case "account":
		err = accountCmd(args)
	case "keys":
		err = keysCmd(args)
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
			os.Exit(exitUsage)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "comm: ") {
			msg = "comm: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		var ce cliError
		if errors.As(err, &ce) {
			os.Exit(ce.code)
		}
		os.Exit(exitFailed)
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
