package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/comm-gateway/comm/account"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/comm-gateway/comm/channels/discord"
	"github.com/comm-gateway/comm/channels/email/mailhost"
	"github.com/comm-gateway/comm/channels/imessage"
	"github.com/comm-gateway/comm/channels/meta"
	"github.com/comm-gateway/comm/channels/slack"
	"github.com/comm-gateway/comm/channels/telegram"
	"github.com/comm-gateway/comm/channels/telnyx"
	"github.com/comm-gateway/comm/channels/twilio"
	"github.com/comm-gateway/comm/channels/wacloud"
	"github.com/comm-gateway/comm/channels/x"
	"github.com/comm-gateway/comm/gateway"

	"github.com/comm-gateway/comm/channels/email"
	"github.com/comm-gateway/comm/channels/email/domain"
	"github.com/comm-gateway/comm/channels/email/inbound"
	"github.com/comm-gateway/comm/channels/email/outbound"
	"github.com/comm-gateway/comm/delivery"
	"github.com/comm-gateway/comm/graph"
	"github.com/comm-gateway/comm/live"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/ratelimit"
	"github.com/comm-gateway/comm/sealed"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/webhook"
)

func serve(s *flagSet, args []string) error {
	listen := s.String("listen", "COMM_LISTEN", "127.0.0.1:8080", "address to listen on")
	dbURL := s.String("database-url", "COMM_DATABASE_URL", "", "postgres:// URL; empty keeps everything in SQLite under the data dir")
	dataDir := s.String("data-dir", "COMM_DATA_DIR", "./comm-data", "directory for the SQLite database and generated keys")
	baseURL := s.String("base-url", "COMM_BASE_URL", "", "public base URL of the gateway; default http://<listen>")
	sqliteSync := s.String("sqlite-sync", "COMM_SQLITE_SYNC", "full", "SQLite durability: full (survives power loss) or normal (survives a crash of comm)")
	stmtCache := s.String("pg-statement-cache", "COMM_PG_STATEMENT_CACHE", "100", "prepared statements each PostgreSQL connection keeps (a statement run again costs one round trip, not two); 0 turns them off, for a pooler in transaction mode")
	writers := s.String("writers", "COMM_WRITERS", "2", "group-commit writers on PostgreSQL (SQLite has one)")
	maxBody := s.String("max-body", "COMM_MAX_BODY_BYTES", "1048576", "largest request body accepted, in bytes")
	introspection := s.String("graphql-introspection", "COMM_GRAPHQL_INTROSPECTION", "false", "allow GraphQL introspection queries")
	gqlCost := s.String("graphql-complexity-limit", "COMM_GRAPHQL_COMPLEXITY_LIMIT", strconv.Itoa(graph.DefaultComplexityLimit), "largest complexity of a GraphQL operation; a list's fields count once per row it may return (first/last, 50 when omitted)")
	gqlBytes := s.String("graphql-max-response-bytes", "COMM_GRAPHQL_MAX_RESPONSE_BYTES", strconv.Itoa(graph.DefaultMaxResponseBytes), "byte budget of one GraphQL response (HTTP or websocket); a larger one is refused with response_too_large")
	msgPageBytes := s.String("message-page-bytes", "COMM_MESSAGE_PAGE_BYTES", strconv.Itoa(messaging.DefaultMessagePageBytes), "byte budget of a page of messages, conversations or custom domains (REST and GraphQL), counting the columns a sender sets (text, html, subject, headers, details; a domain's DNS answers): a page stops before the row that would pass it (REST says more follow with a Link rel=\"next\" header, GraphQL with hasNextPage); a larger row comes alone; 0 means the default")
	playground := s.String("graphql-playground", "COMM_GRAPHQL_PLAYGROUND", "false", "serve a GraphiQL page at /graphql/playground")
	allowPrivate := s.String("webhook-allow-private", "COMM_WEBHOOK_ALLOW_PRIVATE", "false", "allow webhook URLs on loopback and private networks, and plain http (tests, LAN installs)")
	disableAfter := s.String("webhook-disable-after", "COMM_WEBHOOK_DISABLE_AFTER", "72h", "disable a webhook endpoint failing continuously this long")
	leaseFlag := s.String("lease", "COMM_LEASE", delivery.DefaultLease.String(), "how long a replica's lease of a webhook endpoint or a provider session lasts without renewal: when a replica dies, another takes its work over within it (plus up to 1 s); renewed every third of it, the work stopping a fifth of it (at most 1 s) before it ends, which must exceed the clock skew between replicas")
	rateSync := s.String("rate-limit-sync", "COMM_RATE_LIMIT_SYNC", ratelimit.DefaultSync.String(), "on PostgreSQL, how often the replicas exchange what their rate limits granted, so that together they grant each limit once (the overshoot is at most what the others grant in about two of these intervals); \"off\": each replica grants every limit on its own")
	encKey := s.String("encryption-key", "COMM_ENCRYPTION_KEY", "", "base64 of 32 bytes sealing secrets at rest, the same on every replica (a check value in the database refuses another); default on SQLite: a key file in the data dir; required on PostgreSQL")
	logFormat := s.String("log-format", "COMM_LOG_FORMAT", "auto", "log format on stderr: text, json (one object a line), or auto: text on a terminal, json otherwise; one line per HTTP request (\"http\") with its request id, route, status, bytes, duration, client IP and project, never a key, a header's value or a body")
	grace := s.String("shutdown-grace", "COMM_SHUTDOWN_GRACE", "30s", "how long in-flight requests may finish on SIGINT/SIGTERM")
	smtpListen := s.String("smtp-listen", "COMM_SMTP_LISTEN", "127.0.0.1:2525", "address of the inbound SMTP listener (the MX of the mail domain); \"off\" disables it")
	mailDomain := s.String("mail-domain", "COMM_MAIL_DOMAIN", email.DefaultMailDomain, "domain of the inbox addresses comm hands out")
	smtpRelay := s.String("smtp-relay", "COMM_SMTP_RELAY", "", "SMTP relay for outbound mail: smtp://user:pass@host:587 (STARTTLS when offered) or smtps://...:465; empty: mail only between inboxes of this gateway")
	smtpCert := s.String("smtp-tls-cert", "COMM_SMTP_TLS_CERT", "", "PEM certificate (chain) offered with STARTTLS on the SMTP listener; with --smtp-tls-key")
	smtpKey := s.String("smtp-tls-key", "COMM_SMTP_TLS_KEY", "", "PEM private key of --smtp-tls-cert")
	smtpMax := s.String("smtp-max-bytes", "COMM_SMTP_MAX_BYTES", "26214400", "largest inbound email accepted, in bytes")
	smtpMaxParts := s.String("smtp-max-parts", "COMM_SMTP_MAX_PARTS", "500", "most MIME parts an inbound email may have (552 5.3.4 beyond), checked before it is parsed")
	smtpMaxDepth := s.String("smtp-max-depth", "COMM_SMTP_MAX_DEPTH", "20", "deepest nesting of multipart MIME parts in an inbound email (554 5.6.0 beyond)")
	smtpMaxB64 := s.String("smtp-max-base64-errors", "COMM_SMTP_MAX_BASE64_ERRORS", "10000", "most bytes outside the base64 alphabet an inbound email's base64 parts may carry (dropped with a warning; 554 5.6.0 beyond)")
	smtpMaxHdr := s.String("smtp-max-header-bytes", "COMM_SMTP_MAX_HEADER_BYTES", "262144", "largest header section of an inbound email, its own or a MIME part's, in bytes (552 5.3.4 beyond), checked before any header parser or the SPF/DKIM/DMARC checks read it")
	smtpMaxField := s.String("smtp-max-header-field-bytes", "COMM_SMTP_MAX_HEADER_FIELD_BYTES", "131072", "longest header field of an inbound email, with its continuation lines, in bytes (552 5.3.4 beyond)")
	smtpParseTimeout := s.String("smtp-parse-timeout", "COMM_SMTP_PARSE_TIMEOUT", "20s", "longest time parsing one inbound email may take (451 4.3.0 beyond, logged)")
	smtpMaxSessions := s.String("smtp-max-sessions", "COMM_SMTP_MAX_SESSIONS", "100", "most SMTP connections open at once (421 4.7.0 at connect beyond); 0: no limit")
	smtpMaxPerIP := s.String("smtp-max-sessions-per-ip", "COMM_SMTP_MAX_SESSIONS_PER_IP", "10", "most SMTP connections open at once from one client IP address (421 4.7.0 at connect beyond); 0: no limit")
	telegramURL := s.String("telegram-api-url", "COMM_TELEGRAM_API_URL", telegram.DefaultAPIURL, "Telegram Bot API base URL (a local Bot API server, a proxy, or a fake in tests)")
	slackURL := s.String("slack-api-url", "COMM_SLACK_API_URL", slack.DefaultAPIURL, "Slack Web API base URL")
	slackID := s.String("slack-client-id", "COMM_SLACK_CLIENT_ID", "", "client id of the operator's Slack app (with its secret and signing secret, customers can install it: POST /v1/connections {\"channel\":\"slack\"})")
	slackSecret := s.String("slack-client-secret", "COMM_SLACK_CLIENT_SECRET", "", "client secret of the operator's Slack app")
	slackSigning := s.String("slack-signing-secret", "COMM_SLACK_SIGNING_SECRET", "", "signing secret of the operator's Slack app (verifies /hooks/slack)")
	discordURL := s.String("discord-api-url", "COMM_DISCORD_API_URL", discord.DefaultAPIURL, "Discord REST API base URL (the gateway's URL comes from it)")
	discordID := s.String("discord-client-id", "COMM_DISCORD_CLIENT_ID", "", "client id of the operator's Discord application (with its secret and bot token, customers can install it: POST /v1/connections {\"channel\":\"discord\"})")
	discordSecret := s.String("discord-client-secret", "COMM_DISCORD_CLIENT_SECRET", "", "client secret of the operator's Discord application")
	discordBot := s.String("discord-bot-token", "COMM_DISCORD_BOT_TOKEN", "", "bot token of the operator's Discord application (one gateway session serves every guild it is installed in)")
	telnyxURL := s.String("telnyx-api-url", "COMM_TELNYX_API_URL", telnyx.DefaultAPIURL, "Telnyx API v2 base URL, with /v2 (SMS through the customer's own Telnyx account: POST /v1/connections {\"channel\":\"sms\",\"provider\":\"telnyx\"})")
	metaURL := s.String("meta-api-url", "COMM_META_API_URL", meta.DefaultAPIURL, "Meta Graph API base URL with its version (facebook, instagram and hosted whatsapp channels)")
	s.EnvAlias("meta-api-url", "COMM_META_GRAPH_URL")
	metaDialog := s.String("meta-dialog-url", "COMM_META_DIALOG_URL", meta.DefaultDialogURL, "Facebook Login dialog URL the operator's Meta app sends people to")
	metaID := s.String("meta-app-id", "COMM_META_APP_ID", "", "app id of the operator's Meta app (with its secret and verify token, customers can connect their Pages by logging in: POST /v1/connections {\"channel\":\"facebook\"}; serving other people's Pages needs Meta App Review)")
	metaSecret := s.String("meta-app-secret", "COMM_META_APP_SECRET", "", "app secret of the operator's Meta app (verifies /hooks/facebook, /hooks/instagram and /hooks/whatsapp)")
	metaVerify := s.String("meta-verify-token", "COMM_META_VERIFY_TOKEN", "", "verify token entered with the callback URLs /hooks/facebook, /hooks/instagram and /hooks/whatsapp in the Meta app's webhook settings")
	waMedia := s.String("whatsapp-hosted-max-media-bytes", "COMM_WHATSAPP_HOSTED_MAX_MEDIA_BYTES", fmt.Sprint(wacloud.DefaultMaxAttachment), "largest hosted WhatsApp media file downloaded into an inbound message, in bytes (larger ones are left out and listed in the message's details)")
	waNumbers := s.String("whatsapp-hosted-numbers", "COMM_WHATSAPP_HOSTED_NUMBERS", "", `the operator's WhatsApp Cloud API numbers, shared among projects by join codes (channel whatsapp, provider hosted, signed-in keys): a JSON array of {"phone_number_id","display_number","access_token"} (a system-user token with whatsapp_business_messaging); their webhooks come to /hooks/whatsapp, verified with --meta-app-secret`)
	metaConfigID := s.String("meta-login-config-id", "COMM_META_LOGIN_CONFIG_ID", "", "Facebook Login for Business configuration id (config_id) to use instead of the default permissions")
	twilioURL := s.String("twilio-api-url", "COMM_TWILIO_API_URL", twilio.DefaultAPIURL, "Twilio REST API base URL (SMS and WhatsApp through customers' own Twilio accounts; a fake in tests)")
	twilioMsgURL := s.String("twilio-messaging-url", "COMM_TWILIO_MESSAGING_URL", twilio.DefaultMessagingURL, "Twilio Messaging API base URL (Messaging Services, WhatsApp typing indicators)")
	imRelays := s.String("imessage-relays", "COMM_IMESSAGE_RELAYS", "", `the operator's BlueBubbles servers for the iMessage channel (paid), a JSON array of {"url","password","address"}: the server's URL, its password and the phone number or email its Apple ID sends from; projects share each relay's address through join codes. Apple may restrict an Apple ID used for automated messaging: the relays are the operator's responsibility`)
	imFollow := s.String("imessage-follow", "COMM_IMESSAGE_FOLLOW", "false", "poll the iMessage relays for new messages instead of registering a webhook (<base-url>/hooks/imessage) on them: for a gateway the relays cannot reach; receipts are not seen then")
	twilioMedia := s.String("twilio-max-media-bytes", "COMM_TWILIO_MAX_MEDIA_BYTES", fmt.Sprint(twilio.DefaultMaxAttachment), "largest MMS or WhatsApp media file downloaded into an inbound message, in bytes (larger ones are left out and listed in the message's details)")
	xURL := s.String("x-api-url", "COMM_X_API_URL", x.DefaultAPIURL, "X API base URL (X direct messages)")
	xAuthorize := s.String("x-authorize-url", "COMM_X_AUTHORIZE_URL", x.DefaultAuthorizeURL, "where people approve the operator's X app (OAuth 2.0 with PKCE)")
	xID := s.String("x-client-id", "COMM_X_CLIENT_ID", "", "OAuth 2.0 client id of the operator's X app (with its secret, signed-in customers can connect their X account: POST /v1/connections {\"channel\":\"x\"}); register <base-url>/oauth/x/callback as its callback URL")
	xSecret := s.String("x-client-secret", "COMM_X_CLIENT_SECRET", "", "OAuth 2.0 client secret of the operator's X app (also verifies x-twitter-webhooks-signature-oauth2)")
	xConsumer := s.String("x-consumer-secret", "COMM_X_CONSUMER_SECRET", "", "OAuth 1.0 consumer secret (API secret key) of the operator's X app: answers webhook CRCs and verifies x-twitter-webhooks-signature; empty: the client secret answers CRCs")
	xBearer := s.String("x-bearer-token", "COMM_X_BEARER_TOKEN", "", "app-only bearer token of the operator's X app, which registers the webhook <base-url>/hooks/x (https, no port); empty: connections poll GET /2/dm_events instead")
	xInsecure := s.String("x-insecure-webhooks", "COMM_X_INSECURE_WEBHOOKS", "false", "register the X webhook even when --base-url is not https without a port (X refuses such URLs; for a fake X)")
	xPoll := s.String("x-poll-interval", "COMM_X_POLL_INTERVAL", x.DefaultPollInterval.String(), "how often X connections without webhooks read GET /2/dm_events (X bills each DM event read)")
	dnsResolver := s.String("dns-resolver", "COMM_DNS_RESOLVER", "", "DNS server (host:port) for domain verification and sender checks; empty: the system resolver")
	mxHost := s.String("mx-host", "COMM_MX_HOST", "", "public host name of the SMTP listener that custom domains point their MX at; default: the mail domain")
	spfInclude := s.String("spf-include", "COMM_SPF_INCLUDE", "", "host whose SPF record lists the relay; custom domains add include:<it>; default spf.<mail domain>")
	eventBody := s.String("event-body-bytes", "COMM_EVENT_BODY_BYTES", "65536", "bytes of JSON each of the text, html and subject of a message may take in a message event (cut between characters, with \"truncated\": true); the message is stored and read whole")
	quarantine := s.String("address-quarantine", "COMM_ADDRESS_QUARANTINE", "720h", "how long a deleted inbox's address on the mail domain cannot be taken by another project (the same project may take it back); 0 disables")
	sandboxOut := s.String("sandbox-outbound-mail", "COMM_SANDBOX_OUTBOUND_MAIL", "false", "let sandbox keys send mail from the mail domain to any outside address (by default only to inboxes of this gateway and to people who wrote to the inbox)")
	sandboxPerHour := s.String("sandbox-mail-per-hour", "COMM_SANDBOX_MAIL_PER_HOUR", "100", "emails to outside addresses a project may queue per hour with a sandbox key (429 with Retry-After beyond)")
	signedInPerHour := s.String("signed-in-mail-per-hour", "COMM_SIGNED_IN_MAIL_PER_HOUR", "1000", "emails to outside addresses a project may queue per hour with a signed-in key (429 with Retry-After beyond)")
	ownershipGrace := s.String("domain-ownership-grace", "COMM_DOMAIN_OWNERSHIP_GRACE", "72h", "how long a verified custom domain's ownership TXT record may be missing on re-checks before the domain is unverified (no signing, no new inboxes, domain.unverified)")
	verifyEvery := s.String("domain-verify-interval", "COMM_DOMAIN_VERIFY_INTERVAL", "10m", "how often pending custom domains are checked again")
	oidcIssuer := s.String("oidc-issuer", "COMM_OIDC_ISSUER", "", "OpenID Connect issuer URL for signing in on /device (comm login); empty: local operator sign-in")
	oidcClientID := s.String("oidc-client-id", "COMM_OIDC_CLIENT_ID", "", "OpenID Connect client id; register <base-url>/device/callback as its redirect URL")
	oidcSecret := s.String("oidc-client-secret", "COMM_OIDC_CLIENT_SECRET", "", "OpenID Connect client secret")
	localPassword := s.String("local-signin-password", "COMM_LOCAL_SIGNIN_PASSWORD", "", "operator password for the local sign-in on /device (used without --oidc-issuer); empty: a random token is printed at start")
	localRemote := s.String("local-signin-allow-remote", "COMM_LOCAL_SIGNIN_ALLOW_REMOTE", "false", "offer the local sign-in on /device even when --listen is not a loopback address (insecure on public networks)")
	sandboxesPerHour := s.String("sandboxes-per-hour", "COMM_SANDBOXES_PER_HOUR", fmt.Sprint(server.DefaultSandboxesPerHour), "sandbox projects one client IP may create per hour (a token bucket of that size); 0: no limit")
	writesPerSecond := s.String("key-writes-per-second", "COMM_KEY_WRITES_PER_SECOND", fmt.Sprint(server.DefaultWritesPerSecond), "writes (mutating REST requests, GraphQL mutation fields) one API key may make per second, sustained; 0: no limit")
	writeBurst := s.String("key-write-burst", "COMM_KEY_WRITE_BURST", fmt.Sprint(server.DefaultWriteBurst), "writes one API key may make in a burst after a pause (the bucket of --key-writes-per-second); 0: the default")
	sandboxConns := s.String("sandbox-max-connections", "COMM_SANDBOX_MAX_CONNECTIONS", fmt.Sprint(messaging.DefaultSandboxConnections), "live connections a project without an account may hold; 0: no limit")
	trustedProxies := s.String("trusted-proxies", "COMM_TRUSTED_PROXIES", "", "comma-separated CIDR ranges of reverse proxies whose X-Forwarded-For gives the client IP (rate limits, logs); empty: none, the peer address counts")
	retention := s.String("event-retention", "COMM_EVENT_RETENTION", "off", "how long the event log keeps events, per project (90d, 36h; d: days): a background job deletes older ones in small batches, always keeping each project's last event, and a cursor older than the earliest kept event answers 410 cursor_expired with earliest_seq; off: events are kept for ever. Messages and attachments are not affected")
	pageBytes := s.String("event-page-bytes", "COMM_EVENT_PAGE_BYTES", "4194304", "byte budget of a page of events (GET /v1/events, GraphQL events, websocket replay): a page stops before the event that would pass it; a larger event comes alone")
	wsQueue := s.String("ws-queue-bytes", "COMM_WS_QUEUE_BYTES", "4194304", "most bytes of data messages waiting to be written to one websocket; subscribers past it page from the database")
	wsTotal := s.String("ws-total-queue-bytes", "COMM_WS_TOTAL_QUEUE_BYTES", "268435456", "most bytes of data messages waiting to be written to all websockets together; subscribers past it page from the database when there is room, a query or mutation result waits for room (then fails with rate_limited), and while it is over three quarters full a socket holding over half of --ws-queue-bytes (or 1/64 of this, if less) without draining, or not reading at all, for 10 s is closed with 1008, the largest first")
	wsControl := s.String("ws-control-queue", "COMM_WS_CONTROL_QUEUE", "256", "most control messages (pong, ka, complete, error) waiting to be written to one websocket; a socket past it (or past --ws-control-queue-bytes) is closed with 1008")
	wsControlBytes := s.String("ws-control-queue-bytes", "COMM_WS_CONTROL_QUEUE_BYTES", "524288", "most bytes of control messages waiting to be written to one websocket")
	wsPerKey := s.String("ws-max-per-key", "COMM_WS_MAX_PER_KEY", "50", "most open websockets of one API key (per replica); more are closed at connection_init with 4429")
	wsPerIP := s.String("ws-max-per-ip", "COMM_WS_MAX_PER_IP", "200", "most open websockets from one client IP (per replica); more are refused at the upgrade with 429")
	wsKeyCheck := s.String("ws-key-check-interval", "COMM_WS_KEY_CHECK_INTERVAL", "5s", "how often the keys of open websockets are checked against the database (a revoked key's sockets close; a revocation's NOTIFY closes them at once)")
	prices := s.String("prices", "COMM_PRICES", account.DefaultPricesJSON, "USD per message of the paid channels by channel (or channel/provider) and direction, a JSON object laid over the defaults (a channel left out keeps its default price; 0 makes it free); each paid message debits the account's credit when it is recorded, a failed send is refunded, a send the balance does not cover answers 402 insufficient_credit")
	metricsListen := s.String("metrics-listen", "COMM_METRICS_LISTEN", "off", "address (host:port) of a separate listener serving Prometheus metrics at /metrics; off: none. Keep it private: it is not authenticated")
	metricsPerProject := s.String("metrics-per-project", "COMM_METRICS_PER_PROJECT", "false", "add per-project series (each project's webhook lag) to the metrics: one series per project")
	cpuprofile := s.String("cpuprofile", "COMM_CPUPROFILE", "", "write a CPU profile of the whole run to this file, for `go tool pprof` (benchmarks, diagnosis)")
	memprofile := s.String("memprofile", "COMM_MEMPROFILE", "", "write a heap profile to this file when shutting down begins (sockets and subscriptions still open), for `go tool pprof`")
	lowCredit := s.String("credit-low-threshold", "COMM_CREDIT_LOW_THRESHOLD", "5", "balance in USD under which account.balance_low is appended to the project's stream (once per crossing); 0 disables")
	if err := s.parse(args, 0, "no arguments"); err != nil {
		return err
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	xInsecureB, err := parseBool("--x-insecure-webhooks", *xInsecure)
	if err != nil {
		return err
	}
	credit, err := parseCredit(*prices, *lowCredit)
	if err != nil {
		return err
	}
	limits, err := parseLimits(*sandboxesPerHour, *writesPerSecond, *writeBurst, *sandboxConns)
	if err != nil {
		return err
	}
	proxies, err := server.ParseTrustedProxies(*trustedProxies)
	if err != nil {
		return fmt.Errorf("--trusted-proxies: %w", err)
	}
	keepEvents, err := parseRetention(*retention)
	if err != nil {
		return err
	}
	nPageBytes, err := parseInt("--event-page-bytes", *pageBytes)
	if err != nil {
		return err
	}
	liveOpts, err := liveOptions(*wsQueue, *wsTotal, *wsControl, *wsControlBytes, *wsPerKey, *wsPerIP, *wsKeyCheck)
	if err != nil {
		return err
	}
	nWriters, err := parseInt("--writers", *writers)
	if err != nil {
		return err
	}
	body, err := parseInt("--max-body", *maxBody)
	if err != nil {
		return err
	}
	graceD, err := parseDuration("--shutdown-grace", *grace)
	if err != nil {
		return err
	}

	logger, err := newLogger(*logFormat, os.Stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	keyFile := filepath.Join(*dataDir, "encryption.key")
	if strings.HasPrefix(*dbURL, "postgres") && strings.TrimSpace(*encKey) == "" {
		// A key file per replica's data dir would give each replica a
		// key of its own: none could open what another sealed.
		hint := "generate one with: openssl rand -base64 32"
		if _, err := os.Stat(keyFile); err == nil {
			hint = "this gateway has sealed its secrets so far with the key in " + keyFile + ": set it to that file's contents"
		}
		return fmt.Errorf("on PostgreSQL every replica must share one encryption key: set --encryption-key (COMM_ENCRYPTION_KEY) to base64 of 32 bytes, the same on every replica; %s", hint)
	}
	nStmt, err := parseInt("--pg-statement-cache", *stmtCache)
	if err != nil {
		return err
	}
	if nStmt == 0 {
		nStmt = -1 // off
	}
	db, err := store.Open(ctx, store.Config{URL: *dbURL, DataDir: *dataDir, SQLiteSync: *sqliteSync, StatementCache: nStmt, Release: version})
	if err != nil {
		return err
	}
	defer db.Close()
	mets, metricsLine, stopMetrics, err := startMetrics(*metricsListen, *metricsPerProject, logger)
	if err != nil {
		return err
	}
	defer stopMetrics()
	log, err := stream.Open(db, stream.Options{Writers: nWriters, PageBytes: nPageBytes, Observer: observer(mets)})
	if err != nil {
		return err
	}
	defer log.Close()
	box, err := sealed.Load(*encKey, keyFile)
	if err != nil {
		return fmt.Errorf("--encryption-key (COMM_ENCRYPTION_KEY) or the key file %s: %w", keyFile, err)
	}
	disableD, err := parseDuration("--webhook-disable-after", *disableAfter)
	if err != nil {
		return err
	}
	lease, err := parseDuration("--lease", *leaseFlag)
	if err == nil && lease < time.Second {
		err = fmt.Errorf("--lease must be at least 1s, not %q", *leaseFlag)
	}
	if err != nil {
		return err
	}
	rateSyncD := time.Duration(-1)
	if *rateSync != "off" {
		if rateSyncD, err = parseDuration("--rate-limit-sync", *rateSync); err != nil {
			return fmt.Errorf("%w (or off)", err)
		}
		if rateSyncD < 10*time.Millisecond || rateSyncD > time.Minute {
			return fmt.Errorf("--rate-limit-sync must be between 10ms and 1m (or off), not %q", *rateSync)
		}
	}
	private, err := parseBool("--webhook-allow-private", *allowPrivate)
	if err != nil {
		return err
	}
	introspect, err := parseBool("--graphql-introspection", *introspection)
	if err != nil {
		return err
	}
	withPlayground, err := parseBool("--graphql-playground", *playground)
	if err != nil {
		return err
	}
	costLimit, err := parseInt("--graphql-complexity-limit", *gqlCost)
	if err != nil {
		return err
	}
	respBytes, err := parseInt("--graphql-max-response-bytes", *gqlBytes)
	if err != nil {
		return err
	}
	nMsgPageBytes, err := parseInt("--message-page-bytes", *msgPageBytes)
	if err != nil {
		return err
	}
	maxMail, err := parseInt("--smtp-max-bytes", *smtpMax)
	if err != nil {
		return err
	}
	smtpLim, err := parseSMTPLimits(*smtpMaxParts, *smtpMaxDepth, *smtpMaxB64, *smtpParseTimeout, *smtpMaxSessions, *smtpMaxPerIP)
	if err != nil {
		return err
	}
	if smtpLim.MaxHeaderBytes, smtpLim.MaxHeaderFieldBytes, err = parseHeaderLimits(*smtpMaxHdr, *smtpMaxField); err != nil {
		return err
	}
	verifyD, err := parseDuration("--domain-verify-interval", *verifyEvery)
	if err != nil {
		return err
	}
	eventBodyN, err := parseInt("--event-body-bytes", *eventBody)
	if err != nil {
		return err
	}
	quarantineD, err := parseDuration("--address-quarantine", *quarantine)
	if err != nil {
		return err
	}
	sandboxOutB, err := parseBool("--sandbox-outbound-mail", *sandboxOut)
	if err != nil {
		return err
	}
	sandboxPerHourN, err := parseInt("--sandbox-mail-per-hour", *sandboxPerHour)
	if err != nil {
		return err
	}
	signedInPerHourN, err := parseInt("--signed-in-mail-per-hour", *signedInPerHour)
	if err != nil {
		return err
	}
	graceOwn, err := parseDuration("--domain-ownership-grace", *ownershipGrace)
	if err != nil {
		return err
	}
	if quarantineD == 0 {
		quarantineD = -1 // none; messaging reads 0 as its default
	}
	allowRemote, err := parseBool("--local-signin-allow-remote", *localRemote)
	if err != nil {
		return err
	}
	if *oidcIssuer != "" && *oidcClientID == "" {
		return errors.New("--oidc-issuer needs --oidc-client-id (COMM_OIDC_CLIENT_ID)")
	}
	mailOpts := email.Options{MailDomain: *mailDomain, Logger: logger}
	if *smtpRelay != "" {
		relay, err := outbound.ParseRelay(*smtpRelay)
		if err != nil {
			return fmt.Errorf("--smtp-relay: %w", err)
		}
		mailOpts.Relay = relay
	}
	resolver := domain.NewResolver(*dnsResolver) // the system resolver when empty
	mx := *mxHost
	if mx == "" {
		mx = *mailDomain
	}
	for _, f := range []struct{ flag, v string }{{"--telegram-api-url", *telegramURL}, {"--slack-api-url", *slackURL}, {"--discord-api-url", *discordURL}, {"--telnyx-api-url", *telnyxURL}, {"--meta-api-url", *metaURL}, {"--meta-dialog-url", *metaDialog},
		{"--twilio-api-url", *twilioURL}, {"--twilio-messaging-url", *twilioMsgURL},
		{"--x-api-url", *xURL}, {"--x-authorize-url", *xAuthorize}} {
		if u, err := url.Parse(f.v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s must be an http(s) URL, not %q", f.flag, f.v)
		}
	}
	if (*slackID == "") != (*slackSecret == "") || (*slackID != "" && *slackSigning == "") {
		return errors.New("--slack-client-id, --slack-client-secret and --slack-signing-secret go together")
	}
	if n := len(slices.DeleteFunc([]string{*discordID, *discordSecret, *discordBot}, func(v string) bool { return v == "" })); n != 0 && n != 3 {
		return errors.New("--discord-client-id, --discord-client-secret and --discord-bot-token go together")
	}
	// Hosted WhatsApp needs the Meta app's secret and verify token, not
	// its id (which only the facebook and instagram login uses).
	hostedOnly := *metaID == "" && *metaSecret != "" && *metaVerify != "" && strings.TrimSpace(*waNumbers) != ""
	if n := len(slices.DeleteFunc([]string{*metaID, *metaSecret, *metaVerify}, func(v string) bool { return v == "" })); n != 0 && n != 3 && !hostedOnly {
		return errors.New("--meta-app-id, --meta-app-secret and --meta-verify-token go together (hosted WhatsApp alone needs only the secret and the verify token)")
	}
	if (*xID == "") != (*xSecret == "") {
		return errors.New("--x-client-id and --x-client-secret go together")
	}
	xPollD, err := time.ParseDuration(*xPoll)
	if err != nil || xPollD < time.Second {
		return fmt.Errorf("--x-poll-interval must be a duration of at least 1s, not %q", *xPoll)
	}
	twilioMediaN, err := strconv.ParseInt(*twilioMedia, 10, 64)
	if err != nil || twilioMediaN <= 0 {
		return fmt.Errorf("--twilio-max-media-bytes must be a positive number of bytes, not %q", *twilioMedia)
	}
	waOpts, err := whatsAppHosted(*waNumbers, *metaURL, *metaSecret, *metaVerify)
	if err != nil {
		return err
	}
	if waOpts.MaxAttachment, err = strconv.ParseInt(*waMedia, 10, 64); err != nil || waOpts.MaxAttachment <= 0 {
		return fmt.Errorf("--whatsapp-hosted-max-media-bytes must be a positive number of bytes, not %q", *waMedia)
	}
	relays, err := imessage.ParseRelays(*imRelays)
	if err != nil {
		return fmt.Errorf("COMM_IMESSAGE_RELAYS (--imessage-relays): %w", err)
	}
	follow, err := parseBool("--imessage-follow", *imFollow)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	base := *baseURL
	if base == "" {
		base = "http://" + ln.Addr().String()
	}
	signIn, signInLine := signInOptions(*oidcIssuer, *oidcClientID, *oidcSecret, *localPassword, allowRemote, ln.Addr(), box)
	g, err := gateway.New(log, gateway.Config{Logger: logger, Credit: credit, Metrics: mets, RateLimitSync: rateSyncD,
		Telegram: telegram.Options{APIURL: *telegramURL},
		Slack:    slack.Options{APIURL: *slackURL, ClientID: *slackID, ClientSecret: *slackSecret, SigningSecret: *slackSigning},
		Discord:  discord.Options{APIURL: *discordURL, ClientID: *discordID, ClientSecret: *discordSecret, BotToken: *discordBot},
		Telnyx:   telnyx.Options{APIURL: *telnyxURL},
		Meta: meta.Options{APIURL: *metaURL, DialogURL: *metaDialog, AppID: *metaID, AppSecret: *metaSecret,
			VerifyToken: *metaVerify, LoginConfigID: *metaConfigID},
		Twilio: twilio.Options{APIURL: *twilioURL, MessagingURL: *twilioMsgURL, MaxAttachment: twilioMediaN},
		X: x.Options{APIURL: *xURL, AuthorizeURL: *xAuthorize, ClientID: *xID, ClientSecret: *xSecret,
			ConsumerSecret: *xConsumer, BearerToken: *xBearer, PollInterval: xPollD, InsecureWebhooks: xInsecureB},
		WhatsAppHosted: waOpts,
		IMessage:       imessage.Options{Relays: relays, Follow: follow},
		Webhook:        webhook.Options{AllowPrivate: private},
		Service: messaging.Options{Box: box, BaseURL: base,
			MessagePageBytes:   nMsgPageBytes,
			SandboxConnections: limits.sandboxConns,
			EventBodyBytes:     eventBodyN},
		Email: mailOpts,
		Mail: mailhost.Options{
			Plan:                domain.PlanConfig{MXHost: mx, SPFInclude: *spfInclude},
			Resolver:            resolver,
			MaxMessageBytes:     int64(maxMail),
			AddressQuarantine:   quarantineD,
			SandboxOutbound:     sandboxOutB,
			SandboxMailPerHour:  sandboxPerHourN,
			SignedInMailPerHour: signedInPerHourN,
			OwnershipGrace:      graceOwn,
		},
		Server: server.Options{BaseURL: base,
			MaxBodyBytes: int64(body), Logger: logger, Playground: withPlayground,
			GraphQL:          graph.Options{Introspection: introspect, ComplexityLimit: costLimit, MaxResponseBytes: int64(respBytes)},
			SignIn:           signIn,
			SandboxesPerHour: limits.sandboxes, WritesPerSecond: limits.writes, WriteBurst: limits.burst,
			TrustedProxies: proxies,
			Live:           liveOpts,
		}})
	if errors.Is(err, gateway.ErrKeyMismatch) {
		from := "from --encryption-key (COMM_ENCRYPTION_KEY)"
		if strings.TrimSpace(*encKey) == "" {
			from = "from the key file " + keyFile + " (no --encryption-key given)"
		}
		err = fmt.Errorf("%w; this gateway's key came %s", err, from)
	}
	if err != nil {
		ln.Close()
		return err
	}
	defer g.Close()
	front := g.Front

	var trim *stream.Retention
	if keepEvents > 0 {
		trim = &stream.Retention{Keep: keepEvents}
	}
	stopWorkers := g.StartWorkers(gateway.Workers{
		Retention:     trim,
		Outbox:        &delivery.Outbox{},
		Webhooks:      &delivery.Webhooks{DisableAfter: disableD, Lease: lease}, // its client allows private targets as --webhook-allow-private says
		Sessions:      &delivery.Sessions{Lease: lease},
		VerifyDomains: verifyD,
	})
	defer stopWorkers()

	var smtpLine string
	if *smtpListen != "off" && *smtpListen != "" {
		mailLn, err := net.Listen("tcp", *smtpListen)
		if err != nil {
			return fmt.Errorf("smtp listen: %w", err)
		}
		mx := &inbound.Server{Domain: *mailDomain, Backend: g.Mail.Backend(), MaxMessageBytes: int64(maxMail), Resolver: resolver,
			MaxParts: smtpLim.MaxParts, MaxDepth: smtpLim.MaxDepth, MaxBase64Errors: smtpLim.MaxBase64Errors, ParseTimeout: smtpLim.ParseTimeout,
			MaxHeaderBytes: smtpLim.MaxHeaderBytes, MaxHeaderFieldBytes: smtpLim.MaxHeaderFieldBytes,
			MaxSessions: smtpLim.MaxSessions, MaxSessionsPerIP: smtpLim.MaxSessionsPerIP, Logger: logger, Observer: mets}
		switch {
		case *smtpCert != "" && *smtpKey != "":
			cert, err := tls.LoadX509KeyPair(*smtpCert, *smtpKey)
			if err != nil {
				return fmt.Errorf("--smtp-tls-cert/--smtp-tls-key: %w", err)
			}
			mx.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		case *smtpCert != "" || *smtpKey != "":
			return errors.New("--smtp-tls-cert and --smtp-tls-key go together")
		}
		go func() {
			if err := mx.Serve(mailLn); err != nil && !errors.Is(err, inbound.ErrServerClosed) {
				logger.Error("smtp listener", "err", err)
			}
		}()
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), graceD)
			defer cancel()
			_ = mx.Shutdown(sctx)
		}()
		smtpLine = fmt.Sprintf("comm: receiving mail for @%s on smtp://%s\n", strings.ToLower(*mailDomain), mailLn.Addr())
	}

	srv := &http.Server{
		Handler:           front,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	fmt.Printf("comm: listening on %s (database: %s)\n", base, db.Where)
	fmt.Print(smtpLine)
	fmt.Print(metricsLine)
	fmt.Print(signInLine)
	fmt.Printf("comm: dashboard at %s/dashboard\n", base)
	fmt.Printf("comm: version %s\n", version)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	stop()
	if *memprofile != "" {
		if err := writeHeapProfile(*memprofile); err != nil {
			logger.Warn("memprofile", "err", err)
		}
	}
	fmt.Println("comm: shutting down; finishing in-flight requests")
	sctx, cancel := context.WithTimeout(context.Background(), graceD)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// writeHeapProfile writes the heap profile, as of the last collection,
// to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	runtime.GC() // the profile is as of the last collection: make it now
	return pprof.WriteHeapProfile(f)
}

// abuseLimits are the limit settings of serve, in the Options' terms
// (negative: off).
type abuseLimits struct{ sandboxes, writes, burst, sandboxConns int }

// parseLimits reads the limit flags; 0 turns a limit off.
func parseLimits(sandboxes, writes, burst, conns string) (abuseLimits, error) {
	var l abuseLimits
	for _, f := range []struct {
		name, v string
		to      *int
	}{{"--sandboxes-per-hour", sandboxes, &l.sandboxes}, {"--key-writes-per-second", writes, &l.writes},
		{"--key-write-burst", burst, &l.burst}, {"--sandbox-max-connections", conns, &l.sandboxConns}} {
		n, err := parseInt(f.name, f.v)
		if err != nil {
			return l, err
		}
		if n == 0 {
			n = -1
		}
		*f.to = n
	}
	return l, nil
}

// smtpLimits are the settings of the SMTP listener's inbound.Server
// fields of the same names.
type smtpLimits struct {
	MaxParts, MaxDepth, MaxBase64Errors int
	ParseTimeout                        time.Duration
	MaxSessions, MaxSessionsPerIP       int
	MaxHeaderBytes, MaxHeaderFieldBytes int
}

// parseHeaderLimits reads --smtp-max-header-bytes and
// --smtp-max-header-field-bytes; both must be at least 1 KiB (a header
// section needs room for its From, To, Date and Message-ID).
func parseHeaderLimits(header, field string) (int, int, error) {
	h, err := parseInt("--smtp-max-header-bytes", header)
	if err != nil {
		return 0, 0, err
	}
	f, err := parseInt("--smtp-max-header-field-bytes", field)
	if err != nil {
		return 0, 0, err
	}
	if h < 1024 || f < 1024 {
		return 0, 0, errors.New("--smtp-max-header-bytes and --smtp-max-header-field-bytes must be at least 1024")
	}
	return h, f, nil
}

// parseSMTPLimits reads the limits of the SMTP listener; a session limit
// of 0 means none (a negative value to inbound.Server).
func parseSMTPLimits(parts, depth, base64Errors, timeout, sessions, perIP string) (smtpLimits, error) {
	var l smtpLimits
	var err error
	if l.MaxParts, err = parseInt("--smtp-max-parts", parts); err != nil {
		return l, err
	}
	if l.MaxDepth, err = parseInt("--smtp-max-depth", depth); err != nil {
		return l, err
	}
	if l.MaxParts < 1 || l.MaxDepth < 1 {
		return l, errors.New("--smtp-max-parts and --smtp-max-depth must be at least 1")
	}
	if l.MaxBase64Errors, err = parseInt("--smtp-max-base64-errors", base64Errors); err != nil {
		return l, err
	}
	if l.MaxBase64Errors == 0 {
		l.MaxBase64Errors = -1 // none allowed
	}
	if l.ParseTimeout, err = parseDuration("--smtp-parse-timeout", timeout); err != nil {
		return l, err
	}
	if l.ParseTimeout == 0 {
		return l, errors.New("--smtp-parse-timeout must be above 0")
	}
	if l.MaxSessions, err = parseInt("--smtp-max-sessions", sessions); err != nil {
		return l, err
	}
	if l.MaxSessionsPerIP, err = parseInt("--smtp-max-sessions-per-ip", perIP); err != nil {
		return l, err
	}
	if l.MaxSessions == 0 {
		l.MaxSessions = -1
	}
	if l.MaxSessionsPerIP == 0 {
		l.MaxSessionsPerIP = -1
	}
	return l, nil
}

// liveOptions parses the websocket settings.
func liveOptions(queue, total, control, controlBytes, perKey, perIP, keyCheck string) (live.Options, error) {
	var o live.Options
	var err error
	for _, f := range []struct {
		name string
		val  string
		to   *int
	}{
		{"--ws-queue-bytes", queue, &o.MaxQueueBytes},
		{"--ws-control-queue", control, &o.ControlQueueFrames},
		{"--ws-control-queue-bytes", controlBytes, &o.ControlQueueBytes},
		{"--ws-max-per-key", perKey, &o.MaxPerKey},
		{"--ws-max-per-ip", perIP, &o.MaxPerIP},
	} {
		if *f.to, err = parseInt(f.name, f.val); err != nil {
			return o, err
		}
	}
	n, err := parseInt("--ws-total-queue-bytes", total)
	if err != nil {
		return o, err
	}
	o.TotalQueueBytes = int64(n)
	o.KeyCheckInterval, err = parseDuration("--ws-key-check-interval", keyCheck)
	return o, err
}

// signInOptions configures sign-in on /device and returns the line to
// print at start. Without an identity provider the local operator sign-in
// is offered on a loopback listener (or with allowRemote); without
// --local-signin-password a random token, valid until the process exits,
// is made and printed. The cookie key derives from the encryption key, so
// sign-in sessions survive a restart and span replicas sharing that key
// (an OpenID callback may reach another replica than the one that sent the
// browser to the provider).
func signInOptions(issuer, clientID, secret, password string, allowRemote bool, addr net.Addr, box *sealed.Box) (server.SignInOptions, string) {
	o := server.SignInOptions{OIDCIssuer: issuer, OIDCClientID: clientID, OIDCClientSecret: secret,
		LocalPassword: password, LocalAllowRemote: allowRemote, CookieKey: box.DeriveKey("device page cookies")}
	if tcp, ok := addr.(*net.TCPAddr); ok {
		o.LoopbackListener = tcp.IP.IsLoopback()
	}
	switch {
	case issuer != "":
		return o, fmt.Sprintf("comm: sign-in on /device and /dashboard with OpenID Connect at %s\n", issuer)
	case !o.LoopbackListener && !allowRemote:
		return o, "comm: sign-in on /device and /dashboard is not configured: set --oidc-issuer (local sign-in needs a loopback --listen or --local-signin-allow-remote)\n"
	case password != "":
		return o, "comm: local operator sign-in on /device and /dashboard with --local-signin-password (no identity provider configured)\n"
	}
	o.LocalToken = rand.Text()
	return o, fmt.Sprintf("comm: local sign-in token for /device and /dashboard: %s (no identity provider configured; valid until this process exits)\n", o.LocalToken)
}

// parseCredit reads --prices and --credit-low-threshold.
func parseCredit(prices, low string) (account.Options, error) {
	p, err := account.ParsePrices(prices)
	if err != nil {
		return account.Options{}, fmt.Errorf("--prices (COMM_PRICES): %v", err)
	}
	t, err := account.ParseDollars(low)
	if err != nil {
		return account.Options{}, fmt.Errorf("--credit-low-threshold (COMM_CREDIT_LOW_THRESHOLD): %v", err)
	}
	if t == 0 {
		t = -1 // none
	}
	// The operator's prices replace the defaults of the channels they
	// name; the others keep theirs (set 0 to make one free).
	return account.Options{Prices: p.Over(account.DefaultPrices()), LowThreshold: t}, nil
}

// whatsAppHosted is hosted WhatsApp's configuration from
// --whatsapp-hosted-numbers (COMM_WHATSAPP_HOSTED_NUMBERS), the Graph API
// URL and the operator's Meta app. A bad value is an error naming the
// variable and the element.
func whatsAppHosted(numbers, graphURL, secret, verify string) (wacloud.Options, error) {
	ns, err := wacloud.ParseNumbers(numbers)
	if err != nil {
		return wacloud.Options{}, fmt.Errorf("--whatsapp-hosted-numbers (COMM_WHATSAPP_HOSTED_NUMBERS): %w", err)
	}
	opts := wacloud.Options{GraphURL: graphURL, AppSecret: secret, VerifyToken: verify, Numbers: ns}
	if err := opts.Check(); err != nil {
		return wacloud.Options{}, fmt.Errorf("--whatsapp-hosted-numbers (COMM_WHATSAPP_HOSTED_NUMBERS): %w", err)
	}
	return opts, nil
}
