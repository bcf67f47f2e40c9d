// Package client is the Go client of comm, the messaging gateway for AI
// agents: typed calls for every REST endpoint, an event listener that
// answers messages, and a receiver for signed push deliveries.
//
// New reads the API key and the gateway's address from options, the
// environment (COMM_API_KEY, COMM_BASE_URL) or a .env file; Listen follows
// the project's event stream and calls a handler for every inbound
// message, with a typing indicator shown while it runs:
//
//	c, err := client.New() // COMM_API_KEY from the environment or .env
//	if err != nil {
//		log.Fatal(err)
//	}
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
//	defer stop()
//	err = c.Listen(ctx, func(ctx context.Context, m *client.InboundMessage) error {
//		return m.Reply(ctx, "You said: "+m.Text)
//	})
//	if err != nil && !errors.Is(err, context.Canceled) {
//		log.Fatal(err)
//	}
//
// Listen keeps its cursor in a file (.comm-cursor) and saves it only past
// events whose handlers finished, so a restarted agent resumes where it
// stopped; see Listen for the exact guarantees.
//
// Errors of the gateway are *Error values carrying the status, code,
// message, parameter and request id of the JSON error body; test them with
// errors.Is against the sentinels:
//
//	_, err := c.ConnectIMessage(ctx)
//	if errors.Is(err, client.ErrPaymentRequired) {
//		fmt.Println("sign in first: comm login")
//	}
//
// Idempotent calls (GET, PUT, DELETE) are retried after 429, 5xx and
// connection errors with exponential backoff and jitter, honouring
// Retry-After; POST calls (replies, sends) are never retried, so nothing
// is sent twice.
//
// Push deliveries are checked with VerifyWebhook, or served by
// WebhookHandler.
package client
