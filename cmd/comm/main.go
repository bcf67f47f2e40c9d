// Command comm is the gateway (comm serve) and its tools.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/joho/godotenv"
)

// command is the one declaration of a subcommand: main dispatches on its
// name, comm help lists its usage and summary, and --help shows its usage,
// about and flags. A command either runs (run, which declares its flags on
// f and parses args with them) or has subcommands (subs).
type command struct {
	name    string // "serve"; "keys create" for a subcommand
	usage   string // what follows "comm" on a usage line: "connect CHANNEL"
	summary string // one line for comm help
	about   string // what it does, for --help
	json    bool   // a client command: it has --json
	run     func(f *flagSet, args []string) error
	// A command with subcommands has no usage, summary or run of its own:
	// its usage line is its subcommands' (subsUsage).
	subs []*command
	// defaultSub runs when the first argument is missing or a flag; when
	// empty, a subcommand must be named.
	defaultSub string
}

// commands are comm's subcommands, in the order comm help lists them.
var commands []*command

func init() {
	commands = []*command{
		{name: "serve", usage: "serve [flags]", summary: "run the gateway",
			about: "Runs the gateway: the REST API under /v1 and /healthz.", run: serve},
		{name: "sandbox", usage: "sandbox [name]", summary: "create a sandbox project; write its key to .env", json: true,
			about: "Creates an anonymous sandbox project and writes COMM_API_KEY and COMM_BASE_URL to .env.", run: sandboxCmd},
		{name: "connect", usage: "connect CHANNEL", summary: "connect a channel (try: comm connect test)", json: true,
			about: "Connects a channel (test, email, telegram, sms --provider twilio, ...).", run: connectCmd},
		{name: "connections", usage: "connections", summary: "list the project's connections, with the webhook URL to give a provider", json: true,
			about: "Lists the project's live connections: channel, status, address, and the webhook URL\nto give the provider where it is set by hand.", run: connectionsCmd},
		{name: "inject", usage: "inject CONNECTION_ID [--sender WHO] TEXT...", summary: "deliver a message into a test connection", json: true,
			about: "Delivers a message into a test connection as if WHO had written it.", run: injectCmd},
		{name: "events", usage: "events [--follow]", summary: "print the event stream", json: true,
			about: "Prints the event stream.", run: eventsCmd},
		{name: "listen", usage: "listen --exec CMD", summary: "answer every message with CMD's output", json: true,
			about: "Runs CMD for every inbound message, with the message as JSON on stdin,\nand replies with its standard output (nothing is sent when it prints nothing).", run: listenCmd},
		{name: "reply", usage: "reply MESSAGE_ID TEXT...", summary: "reply to a message", json: true,
			about: "Replies to a message in its conversation.", run: replyCmd},
		{name: "send", usage: "send --connection ID --to RECIPIENT TEXT...", summary: "send a message proactively", json: true,
			about: "Sends a message proactively.", run: sendCmd},
		{name: "webhook", about: "Manages the project's push endpoint (webhook).", subs: []*command{
			webhookSub("set URL [--secret S] [--from-seq N]", "set the push endpoint",
				"Sets the project's push endpoint to URL. The signing secret is --secret, or generated\nand shown once when empty; with --from-seq, deliveries resume after that seq.", 1),
			webhookSub("get", "show the push endpoint", "Shows the project's push endpoint: its URL, status, cursor and last error.", 0),
			webhookSub("delete", "delete the push endpoint", "Deletes the project's push endpoint: pushes stop.", 0),
			webhookSub("replay --from-seq N", "push the events after seq N again", "Moves the push endpoint's cursor to seq N: deliveries resume with the event after it.", 0),
			webhookSub("attempts", "list the latest delivery attempts", "Lists the push endpoint's latest 50 delivery attempts, newest first: when, which\nseq, whether it succeeded, the answer's status and latency, and the error.", 0),
		}},
		{name: "login", usage: "login", summary: "sign in through the browser; upgrade the key in .env", json: true,
			about: "Signs in through the browser (device flow) and writes the signed-in key to .env.\nThe sandbox project of the current key carries over into the account.", run: loginCmd},
		{name: "account", usage: "account", summary: "the signed-in account: balance, ledger, projects", json: true,
			about: "Shows the account of the signed-in key: who signed in, the credit balance,\nthe ledger and the account's projects. A sandbox key has no account: run comm login.", run: accountCmd},
		{name: "keys", about: "Lists, makes or revokes the project's API keys.", defaultSub: "list", subs: []*command{
			{name: "keys list", usage: "keys [list]", summary: "list the project's API keys", json: true,
				about: "Lists the project's API keys, revoked ones included (* marks the key in use).\nThe keys themselves are never shown again after they were made.", run: keysList},
			{name: "keys create", usage: "keys create [--name N]", summary: "make another API key (shown only once)", json: true,
				about: "Makes another API key for the project, of the current key's kind, and prints it:\nit is shown only this once.", run: keysCreate},
			{name: "keys revoke", usage: "keys revoke ID", summary: "revoke a key: it stops working at once", json: true,
				about: "Revokes one of the project's keys: it stops working at once.", run: keysRevoke},
		}},
		{name: "backup", usage: "backup DEST", summary: "copy the SQLite database to DEST while the gateway serves",
			about: backupAbout, run: backupCmd},
		{name: "restore", usage: "restore SRC [--force]", summary: "put a backup in place (the gateway stopped)",
			about: restoreAbout, run: restoreCmd},
		{name: "bench", usage: "bench [flags]", summary: "measure the gateway on this machine",
			about: "Measures the event log and the REST API on this machine and prints a Markdown table.\n" +
				"SQLite runs in a temporary directory; PostgreSQL in a scratch schema dropped afterwards.\n" +
				"The load runs in this process and shares its CPU with what is measured.", run: runBench},
		{name: "version", usage: "version", summary: "print comm's version",
			about: "Prints comm's version (the release a database written by this binary comes from).", run: versionCmd},
		{name: "help", usage: "help", summary: "show this text"},
	}
}

// webhookSub declares a webhook subcommand; usage starts with its name.
// They share one implementation and its flags (webhookCmd).
func webhookSub(usage, summary, about string, nargs int) *command {
	sub, _, _ := strings.Cut(usage, " ")
	return &command{name: "webhook " + sub, usage: "webhook " + usage, summary: summary, about: about, json: true,
		run: func(f *flagSet, args []string) error { return webhookCmd(f, sub, nargs, args) }}
}

const overviewHead = `comm: a self-hostable messaging gateway for AI agents

Usage:
`

const overviewTail = `
Client commands read COMM_API_KEY and COMM_BASE_URL from the environment or
.env, print text (or JSON with --json), and exit 0 on success, 1 when the
gateway refused or could not be reached, 2 on bad usage, 3 when no key is
configured.

Run "comm COMMAND --help" for a command's flags.
`

// printOverview is comm help: every command's usage line and summary.
func printOverview(w io.Writer) {
	fmt.Fprint(w, overviewHead)
	for _, c := range commands {
		printCommandLines(w, c)
	}
	fmt.Fprint(w, overviewTail)
}

func printCommandLines(w io.Writer, c *command) {
	if len(c.subs) > 0 {
		for _, s := range c.subs {
			printCommandLines(w, s)
		}
		return
	}
	line := "comm " + c.usage
	if len(line) > 31 {
		fmt.Fprintf(w, "  %s\n  %-31s %s\n", line, "", c.summary)
		return
	}
	fmt.Fprintf(w, "  %-31s %s\n", line, c.summary)
}

func main() {
	if err := loadDotEnv(".env"); err != nil {
		fmt.Fprintln(os.Stderr, "comm:", err)
		os.Exit(2)
	}
	if len(os.Args) < 2 {
		printOverview(os.Stderr)
		os.Exit(exitUsage)
	}
	name, args := os.Args[1], os.Args[2:]
	var cmd *command
	for _, c := range commands {
		if c.name == name {
			cmd = c
		}
	}
	switch {
	case name == "help" || name == "-h" || name == "--help":
		printOverview(os.Stdout)
		return
	case cmd == nil:
		fmt.Fprintf(os.Stderr, "comm: unknown command %q\n\n", name)
		printOverview(os.Stderr)
		os.Exit(exitUsage)
	}
	err := runCommand(cmd, args)
	if err == nil {
		return
	}
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(exitOK)
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

// runCommand runs c with its arguments, choosing the subcommand first
// where c has them.
func runCommand(c *command, args []string) error {
	if len(c.subs) == 0 {
		return c.run(newFlagSet(c), args)
	}
	sub := c.defaultSub
	if len(args) > 0 && (sub == "" || !strings.HasPrefix(args[0], "-")) {
		sub, args = args[0], args[1:]
	}
	if sub == "" {
		return cliError{exitUsage, fmt.Errorf("usage: %s", subsUsage(c))}
	}
	if sub == "-h" || sub == "-help" || sub == "--help" {
		printSubsHelp(os.Stderr, c)
		return flag.ErrHelp
	}
	var names []string
	for _, s := range c.subs {
		if s.name == c.name+" "+sub {
			return runCommand(s, args)
		}
		names = append(names, strings.TrimPrefix(s.name, c.name+" "))
	}
	list := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	return cliError{exitUsage, fmt.Errorf("unknown %s command %q: %s (usage: %s)", c.name, sub, list, subsUsage(c))}
}

// subsUsage is the usage of c's subcommands on one line:
// "comm keys [list] | create [--name N] | revoke ID".
func subsUsage(c *command) string {
	var us []string
	for _, s := range c.subs {
		u := s.usage
		if len(us) > 0 {
			u = strings.TrimPrefix(u, c.name+" ")
		}
		us = append(us, u)
	}
	return "comm " + strings.Join(us, " | ")
}

// printSubsHelp is the --help of a command with subcommands.
func printSubsHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n\nCommands:\n", subsUsage(c), c.about)
	for _, s := range c.subs {
		printCommandLines(w, s)
	}
	fmt.Fprintf(w, "\nRun \"comm %s COMMAND --help\" for a command's flags.\n", c.name)
}

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
