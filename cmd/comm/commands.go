package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/joho/godotenv"

	"github.com/comm-gateway/comm/client"
)

// defaultBaseURL is where comm serve listens by default.
const defaultBaseURL = "http://127.0.0.1:8080"

// sandboxCmd: comm sandbox [name] creates a project and writes its key and
// the base URL to .env.
func sandboxCmd(f *flagSet, args []string) error {
	base := f.String("base-url", "COMM_BASE_URL", defaultBaseURL, "the gateway's address")
	envFile := f.String("env-file", "", ".env", "where to write the key")
	force := f.Bool("force", "", false, "replace another key already in the env file")
	if err := f.parse(args, -1, "at most one name"); err != nil {
		return err
	}
	if len(f.positional) > 1 {
		return cliError{exitUsage, errors.New("want at most one name; quote a name with spaces")}
	}
	if *base == "" {
		*base = defaultBaseURL // an empty COMM_BASE_URL counts as unset, as in the client library
	}
	name := "sandbox"
	if len(f.positional) == 1 {
		name = f.positional[0]
	}
	existing, err := godotenv.Read(*envFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return cliError{exitFailed, fmt.Errorf("reading %s: %w", *envFile, err)}
	}
	if old := existing["COMM_API_KEY"]; old != "" && !*force {
		return cliError{exitFailed, fmt.Errorf("%s already holds a COMM_API_KEY; pass --force to replace it", *envFile)}
	}
	ctx, cancel := signalContext()
	defer cancel()
	sb, err := client.CreateSandbox(ctx, *base, name)
	if err != nil {
		return cliError{exitFailed, err}
	}
	if err := writeEnv(*envFile, map[string]string{"COMM_API_KEY": sb.APIKey, "COMM_BASE_URL": *base}); err != nil {
		return cliError{exitFailed, err}
	}
	output(*f.json, sb, func(w io.Writer) {
		fmt.Fprintf(w, "Created project %s (customer %s, agent %s).\nWrote COMM_API_KEY and COMM_BASE_URL to %s; the key is shown only once.\n",
			sb.ProjectID, sb.CustomerID, sb.AgentID, *envFile)
	})
	return nil
}

// writeEnv sets keys in an env file, keeping its other lines.
func writeEnv(path string, set map[string]string) error {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var lines []string
	done := map[string]bool{}
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		key, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "export "), "=")
		if v, ok := set[strings.TrimSpace(key)]; ok {
			line = strings.TrimSpace(key) + "=" + v
			done[strings.TrimSpace(key)] = true
		}
		if line != "" || len(lines) > 0 {
			lines = append(lines, line)
		}
	}
	for _, k := range []string{"COMM_API_KEY", "COMM_BASE_URL"} {
		if v, ok := set[k]; ok && !done[k] {
			lines = append(lines, k+"="+v)
		}
	}
	return os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// eventsCmd: comm events prints the stream, optionally following it.
func eventsCmd(f *flagSet, args []string) error {
	after := f.Int64("after-seq", "", 0, "print events after this seq")
	limit := f.Int("limit", "", 100, "events per page (1 to 1000)")
	typ := f.String("type", "", "", "only events of this type")
	follow := f.Bool("follow", "", false, "keep waiting for new events (Ctrl-C stops)")
	if err := f.parse(args, 0, "no arguments"); err != nil {
		return err
	}
	if *limit < 1 || *limit > 1000 {
		return cliError{exitUsage, fmt.Errorf("--limit must be between 1 and 1000")}
	}
	if *after < 0 {
		return cliError{exitUsage, fmt.Errorf("--after-seq must not be negative")}
	}
	c, err := connectClient()
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	cursor := *after
	header := !*f.json
	for {
		var evs []client.Event
		if *follow {
			sp := startSpinner("waiting for events (Ctrl-C stops)")
			evs, err = c.EventsWait(ctx, cursor, *limit, *typ, 30*time.Second)
			sp.Stop()
		} else {
			evs, err = c.Events(ctx, cursor, *limit, *typ)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return cliError{exitFailed, err}
		}
		printEvents(*f.json, evs, &header)
		if len(evs) > 0 {
			cursor = evs[len(evs)-1].Seq
		}
		// A page may hold fewer than limit events (pages also have a byte
		// budget): only an empty one says the stream is read to its end.
		if !*follow && len(evs) == 0 {
			return nil
		}
	}
}

func printEvents(asJSON bool, evs []client.Event, header *bool) {
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		for _, e := range evs {
			enc.Encode(e)
		}
		return
	}
	var rows [][]string
	if *header {
		rows = append(rows, []string{"SEQ", "TYPE", "SUMMARY"})
		*header = false
	}
	for _, e := range evs {
		rows = append(rows, []string{strconv.FormatInt(e.Seq, 10), e.Type, summary(e)})
	}
	table(os.Stdout, rows)
}

// summary is a one-line description of an event.
func summary(e client.Event) string {
	var d struct {
		Message *struct {
			ID, Sender, Recipient, Text, Status string
		} `json:"message"`
		Connection *struct{ ID, Channel string } `json:"connection"`
	}
	json.Unmarshal(e.Data, &d)
	switch {
	case d.Message != nil:
		who := d.Message.Sender
		if d.Message.Recipient != "" && e.Type != "message.received" {
			who = "to " + d.Message.Recipient
		}
		text := d.Message.Text
		if len(text) > 60 {
			text = text[:57] + "..."
		}
		return fmt.Sprintf("%s %s: %q", d.Message.ID, who, text)
	case d.Connection != nil:
		return d.Connection.ID + " (" + d.Connection.Channel + ")"
	}
	s := string(e.Data)
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

// listenCmd: comm listen --exec CMD answers every message with CMD's output.
func listenCmd(f *flagSet, args []string) error {
	command := f.String("exec", "", "", "shell command to run per message (required)")
	timeout := f.Duration("timeout", "", time.Minute, "how long CMD may run")
	cursorFile := f.String("cursor-file", "", ".comm-cursor", "where the cursor is kept across restarts")
	ws := f.Bool("websocket", "", false, "follow the GraphQL subscription instead of polling")
	if err := f.parse(args, 0, "no arguments"); err != nil {
		return err
	}
	if *command == "" {
		f.fs.Usage()
		return cliError{exitUsage, errors.New("--exec is required")}
	}
	c, err := connectClient()
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	opts := []client.ListenOption{client.WithCursorFile(*cursorFile), client.WithErrorHandler(func(e *client.Event, err error) {
		fmt.Fprintf(os.Stderr, "comm listen: event %d: %v\n", e.Seq, err)
	})}
	if *ws {
		opts = append(opts, client.WithWebsocket())
	}
	fmt.Fprintf(os.Stderr, "comm listen: answering messages with %q (Ctrl-C stops)\n", *command)
	err = c.Listen(ctx, func(ctx context.Context, m *client.InboundMessage) error {
		in, _ := json.Marshal(map[string]any{
			"id": m.ID, "conversation_id": m.ConversationID, "connection_id": m.ConnectionID, "channel": m.Channel,
			"sender": m.Sender, "subject": m.Subject, "text": m.Text, "html": m.HTML,
			"customer_id": m.CustomerID, "agent_id": m.AgentID,
		})
		out, err := runExec(ctx, *command, in, *timeout)
		if err != nil {
			return err
		}
		if out == "" {
			return nil
		}
		if err := m.Reply(ctx, out); err != nil {
			return err
		}
		if *f.json {
			json.NewEncoder(os.Stdout).Encode(map[string]string{"message_id": m.ID, "reply": out})
		} else {
			fmt.Printf("%s from %s: %q -> replied %q\n", m.ID, m.Sender, m.Text, out)
		}
		return nil
	}, opts...)
	if err != nil && ctx.Err() == nil {
		return cliError{exitFailed, err}
	}
	return nil
}

// sendCmd: comm send --connection ID --to WHO TEXT...
func sendCmd(f *flagSet, args []string) error {
	conn := f.String("connection", "", "", "connection to send through (required)")
	to := f.String("to", "", "", "recipient (required)")
	subject := f.String("subject", "", "", "subject, on channels that carry one")
	if err := f.parse(args, -1, "the text"); err != nil {
		return err
	}
	text := strings.Join(f.positional, " ")
	if *conn == "" || *to == "" || text == "" {
		f.fs.Usage()
		return cliError{exitUsage, errors.New("--connection, --to and a text are required")}
	}
	c, err := connectClient()
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	m, err := c.Send(ctx, client.SendRequest{ConnectionID: *conn, To: *to, Text: text, Subject: *subject})
	if err != nil {
		return cliError{exitFailed, err}
	}
	printMessage(*f.json, m)
	return nil
}

// replyCmd: comm reply MESSAGE_ID TEXT...
func replyCmd(f *flagSet, args []string) error {
	if err := f.parse(args, -1, "a message id and a text"); err != nil {
		return err
	}
	if len(f.positional) < 2 {
		f.fs.Usage()
		return cliError{exitUsage, errors.New("want a message id and a text")}
	}
	c, err := connectClient()
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	m, err := c.Reply(ctx, f.positional[0], client.ReplyRequest{Text: strings.Join(f.positional[1:], " ")})
	if err != nil {
		return cliError{exitFailed, err}
	}
	printMessage(*f.json, m)
	return nil
}

func printMessage(asJSON bool, m *client.Message) {
	output(asJSON, m, func(w io.Writer) {
		to := ""
		if m.Recipient != nil {
			to = " to " + *m.Recipient
		}
		fmt.Fprintf(w, "%s %s%s in %s\n", m.ID, m.Status, to, m.ConversationID)
	})
}

// connectCmd: comm connect CHANNEL.
func connectCmd(f *flagSet, args []string) error {
	provider := f.String("provider", "", "", "provider, where a channel has several")
	name := f.String("name", "", "", "a name for the connection")
	config := f.String("config", "", "", "the channel's configuration as a JSON object")
	wait := f.Duration("wait", "", 10*time.Minute, "how long to wait for an install of the operator's app (Slack, Discord, X) to be approved; 0: do not wait")
	if err := f.parse(args, 1, "one channel"); err != nil {
		return err
	}
	req := client.ConnectRequest{Channel: f.positional[0], Provider: *provider, Name: *name}
	if *config != "" {
		var v map[string]any
		if err := json.Unmarshal([]byte(*config), &v); err != nil {
			return cliError{exitUsage, fmt.Errorf("--config is not a JSON object: %w", err)}
		}
		req.Config = v
	}
	c, err := connectClient()
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	conn, err := c.Connect(ctx, req)
	if err != nil {
		return cliError{exitFailed, err}
	}
	if conn.Status == "pending" && conn.AuthorizeURL != nil && *wait > 0 {
		// An install of the operator's app: the person approves it in the
		// browser; the gateway's callback makes the connection active.
		fmt.Fprintf(os.Stderr, "Open this page to install comm's %s app, and approve it:\n\n  %s\n\nWaiting for the approval (up to %s)...\n",
			conn.Channel, *conn.AuthorizeURL, *wait)
		openBrowser(*conn.AuthorizeURL)
		if conn, err = waitActive(ctx, c, conn.ID, *wait); err != nil {
			return err
		}
	}
	output(*f.json, conn, func(w io.Writer) {
		fmt.Fprintf(w, "Connected %s: %s (%s)", conn.Channel, conn.ID, conn.Status)
		if conn.Address != nil {
			fmt.Fprintf(w, " %s", *conn.Address)
		}
		fmt.Fprintln(w)
		if conn.JoinCode != nil && conn.Address != nil {
			// A shared line (iMessage relay, hosted WhatsApp number).
			fmt.Fprintf(w, "People reach this connection by sending \"join %s\" to %s", *conn.JoinCode, *conn.Address)
			if conn.JoinLink != nil {
				fmt.Fprintf(w, " (link: %s)", *conn.JoinLink)
			}
			fmt.Fprintln(w)
		}
		if conn.WebhookURL != nil {
			fmt.Fprintf(w, "Webhook URL (where %s sends its events): %s\n", conn.Channel, *conn.WebhookURL)
		}
		if conn.Status == "pending" && conn.AuthorizeURL != nil {
			fmt.Fprintf(w, "Approve the install at: %s\n", *conn.AuthorizeURL)
		}
	})
	return nil
}

// waitActive polls a pending connection until it is no longer pending.
func waitActive(ctx context.Context, c *client.Client, id string, wait time.Duration) (*client.Connection, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, cliError{exitFailed, fmt.Errorf("connection %s is still pending after %s: open its authorize_url again (comm connections --json), or delete it", id, wait)}
		case <-tick.C:
		}
		conn, err := c.Connection(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				continue
			}
			return nil, cliError{exitFailed, err}
		}
		if conn.Status != "pending" {
			return conn, nil
		}
	}
}

// connectionsCmd: comm connections (the project's live connections).
func connectionsCmd(f *flagSet, args []string) error {
	if err := f.parse(args, 0, "no arguments"); err != nil {
		return err
	}
	c, err := connectClient()
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	var all []client.Connection
	after := ""
	for {
		page, err := c.Connections(ctx, after, 500)
		if err != nil {
			return cliError{exitFailed, err}
		}
		all = append(all, page...)
		if len(page) < 500 {
			break
		}
		after = page[len(page)-1].ID
	}
	if all == nil {
		all = []client.Connection{}
	}
	output(*f.json, all, func(w io.Writer) {
		rows := [][]string{{"ID", "CHANNEL", "STATUS", "ADDRESS", "WEBHOOK URL"}}
		for _, c := range all {
			ch := c.Channel
			if c.Provider != nil {
				ch += " (" + *c.Provider + ")"
			}
			rows = append(rows, []string{c.ID, ch, c.Status, orDash(c.Address), orDash(c.WebhookURL)})
		}
		table(w, rows)
	})
	return nil
}

// injectCmd: comm inject CONNECTION_ID --sender WHO TEXT... (test channel).
func injectCmd(f *flagSet, args []string) error {
	sender := f.String("sender", "", "someone@example.com", "who the message is from")
	id := f.String("id", "", "", "provider message id (a repeat is a duplicate delivery)")
	if err := f.parse(args, -1, "a connection id and a text"); err != nil {
		return err
	}
	if len(f.positional) < 2 {
		f.fs.Usage()
		return cliError{exitUsage, errors.New("want a connection id and a text")}
	}
	c, err := connectClient()
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	m, err := c.Inject(ctx, f.positional[0], client.InjectRequest{Sender: *sender, Text: strings.Join(f.positional[1:], " "), ID: *id})
	if err != nil {
		return cliError{exitFailed, err}
	}
	output(*f.json, m, func(w io.Writer) {
		fmt.Fprintf(w, "%s from %s in %s\n", m.ID, m.Sender, m.ConversationID)
	})
	return nil
}

// webhookCmd: comm webhook set URL | get | delete | replay --from-seq N | attempts.
// The subcommands share this function and its flags; nargs is how many
// arguments sub takes.
func webhookCmd(f *flagSet, sub string, nargs int, args []string) error {
	secret := f.String("secret", "", "", "signing secret (set; generated and shown once when empty)")
	fromSeq := f.Int64("from-seq", "", -1, "cursor: deliveries resume after this seq (set, replay)")
	if err := f.parse(args, nargs, "set takes a URL; the others no argument"); err != nil {
		return err
	}
	c, err := connectClient()
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	var wh *client.Webhook
	switch sub {
	case "set":
		var opts []client.WebhookOption
		if *fromSeq >= 0 {
			opts = append(opts, client.WebhookFromSeq(*fromSeq))
		}
		wh, err = c.SetWebhook(ctx, f.positional[0], *secret, opts...)
	case "get":
		wh, err = c.GetWebhook(ctx)
	case "delete":
		if err = c.DeleteWebhook(ctx); err == nil {
			output(*f.json, map[string]bool{"deleted": true}, func(w io.Writer) { fmt.Fprintln(w, "Webhook deleted.") })
			return nil
		}
	case "replay":
		if *fromSeq < 0 {
			return cliError{exitUsage, errors.New("replay needs --from-seq")}
		}
		wh, err = c.ReplayWebhook(ctx, *fromSeq)
	case "attempts":
		as, err := c.WebhookAttempts(ctx, "", 50)
		if err != nil {
			return cliError{exitFailed, err}
		}
		output(*f.json, as, func(w io.Writer) {
			rows := [][]string{{"AT", "SEQ", "OK", "STATUS", "MS", "ERROR"}}
			for _, a := range as {
				e := ""
				if a.Error != nil {
					e = *a.Error
				}
				rows = append(rows, []string{a.At.Format(time.RFC3339), strconv.FormatInt(a.Seq, 10),
					strconv.FormatBool(a.OK), strconv.Itoa(a.StatusCode), strconv.Itoa(a.LatencyMS), e})
			}
			table(w, rows)
		})
		return nil
	}
	if err != nil {
		return cliError{exitFailed, err}
	}
	output(*f.json, wh, func(w io.Writer) {
		fmt.Fprintf(w, "Webhook %s -> %s: %s, cursor %d\n", wh.ID, wh.URL, wh.Status, wh.Cursor)
		if wh.Secret != "" {
			fmt.Fprintf(w, "Secret (shown once): %s\n", wh.Secret)
		}
		if wh.LastError != nil {
			fmt.Fprintf(w, "Last error: %s\n", *wh.LastError)
		}
	})
	return nil
}

// loginCmd: comm login runs the device sign-in and writes the signed-in
// key to .env, replacing the sandbox key it upgrades.
func loginCmd(f *flagSet, args []string) error {
	envFile := f.String("env-file", "", ".env", "where the key is read from and written to")
	noBrowser := f.Bool("no-browser", "", false, "do not try to open a browser")
	if err := f.parse(args, 0, "no arguments"); err != nil {
		return err
	}
	existing, err := godotenv.Read(*envFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return cliError{exitFailed, fmt.Errorf("reading %s: %w", *envFile, err)}
	}
	base := envOr("COMM_BASE_URL", existing["COMM_BASE_URL"])
	key := envOr("COMM_API_KEY", existing["COMM_API_KEY"])
	ctx, cancel := signalContext()
	defer cancel()
	var sp *spinner
	res, err := client.Login(ctx, base, key, func(p client.LoginPrompt) {
		fmt.Printf("Open this page to sign in, and check that it shows the code %s:\n\n  %s\n\n", p.Code, p.URL)
		if !*noBrowser {
			openBrowser(p.URL)
		}
		sp = startSpinner("waiting for you to approve in the browser (Ctrl-C cancels)")
	})
	if sp != nil {
		sp.Stop()
	}
	if err != nil {
		if ctx.Err() != nil {
			return cliError{exitFailed, errors.New("sign-in cancelled")}
		}
		return cliError{exitFailed, err}
	}
	if err := writeEnv(*envFile, map[string]string{"COMM_API_KEY": res.APIKey, "COMM_BASE_URL": res.BaseURL}); err != nil {
		return cliError{exitFailed, err}
	}
	// The project and the account are shown when the new key can fetch
	// them; the sign-in succeeded either way.
	c, err := client.New(client.WithAPIKey(res.APIKey), client.WithBaseURL(res.BaseURL))
	if err != nil {
		fmt.Printf("Signed in; the signed-in key is in %s.\n", *envFile)
		return nil
	}
	if p, err := c.Project(ctx); err == nil {
		fmt.Printf("Signed in. Project %s (%s); the signed-in key is in %s.\n", p.ID, p.Name, *envFile)
	} else {
		fmt.Printf("Signed in; the signed-in key is in %s.\n", *envFile)
	}
	if a, err := c.Account(ctx); err == nil {
		fmt.Printf("Account: %s; balance %s.\n", who(a.Account), money(a.Currency, a.Balance))
	}
	return nil
}

// accountCmd: comm account prints the signed-in account: who, the
// balance, the ledger and the projects.
func accountCmd(f *flagSet, args []string) error {
	if err := f.parse(args, 0, "no arguments"); err != nil {
		return err
	}
	c, err := connectClient()
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	a, err := c.Account(ctx)
	if errors.Is(err, client.ErrForbidden) {
		var e *client.Error
		errors.As(err, &e)
		return cliError{exitFailed, fmt.Errorf("no account for this key (403 %s): %s", e.Code, e.Message)}
	}
	if err != nil {
		return cliError{exitFailed, err}
	}
	output(*f.json, a, func(w io.Writer) {
		fmt.Fprintf(w, "Account %s: %s (signed in with %s)\n", a.Account.ID, who(a.Account), a.Account.Issuer)
		fmt.Fprintf(w, "Balance: %s\n", money(a.Currency, a.Balance))
		fmt.Fprintln(w, "\nLedger:")
		rows := [][]string{{"  DATE", "KIND", "AMOUNT", "PROJECT", "DESCRIPTION"}}
		for _, l := range a.Ledger {
			rows = append(rows, []string{"  " + l.CreatedAt.Format(time.RFC3339), l.Kind, money(a.Currency, l.Amount),
				orDash(l.ProjectID), l.Description})
		}
		table(w, rows)
		fmt.Fprintln(w, "\nProjects:")
		rows = [][]string{{"  ID", "NAME", "CONNECTIONS", "LAST SEQ", "CREATED"}}
		for _, p := range a.Projects {
			rows = append(rows, []string{"  " + p.ID, p.Name, strconv.Itoa(p.Connections),
				strconv.FormatInt(p.LastSeq, 10), p.CreatedAt.Format(time.RFC3339)})
		}
		table(w, rows)
	})
	return nil
}

// who names an account's person: "Name <email>", or what is known.
func who(a client.Account) string {
	switch {
	case a.Name != "" && a.Email != "":
		return a.Name + " <" + a.Email + ">"
	case a.Email != "":
		return a.Email
	case a.Name != "":
		return a.Name
	}
	return a.Subject
}

// money is an amount with its currency: "USD 100.00".
func money(currency, amount string) string { return currency + " " + amount }

func orDash(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}

func timeOr(t *time.Time, none string) string {
	if t == nil {
		return none
	}
	return t.Format(time.RFC3339)
}

// keysList: comm keys [list]; keysCreate: comm keys create [--name N];
// keysRevoke: comm keys revoke ID.
func keysList(f *flagSet, args []string) error { return keysCmd(f, "list", args) }

func keysCreate(f *flagSet, args []string) error { return keysCmd(f, "create", args) }

func keysRevoke(f *flagSet, args []string) error { return keysCmd(f, "revoke", args) }

func keysCmd(f *flagSet, sub string, args []string) error {
	var name *string
	nargs := 0
	switch sub {
	case "create":
		name = f.String("name", "", "", "what the key is for")
	case "revoke":
		nargs = 1
	}
	if err := f.parse(args, nargs, map[int]string{0: "no arguments", 1: "one key id"}[nargs]); err != nil {
		return err
	}
	c, err := connectClient()
	if err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	switch sub {
	case "create":
		k, err := c.CreateKey(ctx, *name)
		if err != nil {
			return cliError{exitFailed, err}
		}
		if *f.json {
			fmt.Fprintln(os.Stderr, "comm: the api_key is shown only this once: store it now.")
		}
		output(*f.json, k, func(w io.Writer) {
			label := ""
			if k.Name != nil {
				label = fmt.Sprintf(" %q", *k.Name)
			}
			fmt.Fprintf(w, "Created %s key %s%s:\n\n  %s\n\n", k.Kind, k.ID, label, k.APIKey)
			fmt.Fprintln(w, "This key is shown only this once: store it now (comm keys lists it as "+k.Display+").")
		})
	case "revoke":
		k, err := c.RevokeKey(ctx, f.positional[0])
		if err != nil {
			return cliError{exitFailed, err}
		}
		output(*f.json, k, func(w io.Writer) {
			fmt.Fprintf(w, "Revoked key %s (%s) at %s.\n", k.ID, k.Display, timeOr(k.RevokedAt, "?"))
			if k.Current {
				fmt.Fprintln(w, "It was the key in use (COMM_API_KEY): calls with it now fail; configure another key.")
			}
		})
	default:
		ks, err := c.Keys(ctx)
		if err != nil {
			return cliError{exitFailed, err}
		}
		output(*f.json, ks, func(w io.Writer) {
			rows := [][]string{{"", "ID", "KIND", "DISPLAY", "NAME", "LAST USED", "REVOKED"}}
			for _, k := range ks {
				mark := ""
				if k.Current {
					mark = "*"
				}
				rows = append(rows, []string{mark, k.ID, k.Kind, k.Display, orDash(k.Name),
					timeOr(k.LastUsedAt, "never"), timeOr(k.RevokedAt, "-")})
			}
			table(w, rows)
		})
	}
	return nil
}

// openBrowser opens url when a desktop is there to show it.
func openBrowser(url string) {
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return
	}
	for _, opener := range []string{"xdg-open", "open"} {
		if path, err := exec.LookPath(opener); err == nil {
			exec.Command(path, url).Start() //nolint:errcheck // the URL is printed anyway
			return
		}
	}
}
