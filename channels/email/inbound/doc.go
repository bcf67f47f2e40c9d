// Package inbound receives email for comm: an SMTP listener (on
// github.com/emersion/go-smtp) acting as the MX of the mail domain, a MIME
// parser (on github.com/jhillyerd/enmime/v2) that turns a raw RFC 5322
// message into a Message with its new text separated from the quoted
// history, and sender authentication (SPF through blitiri.com.ar/go/spf,
// DKIM through github.com/emersion/go-msgauth, a DMARC alignment check over
// both).
//
// The gateway plugs in through Backend: Accept is asked at RCPT time whether
// an address is a known inbox, Deliver receives each fully parsed message
// after DATA. Deliver is never called with a message that failed to parse
// or exceeded a limit; such mail is refused with an SMTP error instead.
//
// Memory: enmime parses from memory, not from a stream. A message is read
// once, capped at the configured maximum size, and held as raw bytes while
// it is parsed; the decoded parts (text, HTML, attachment bytes) are a
// second copy. Nothing larger than the size limit is ever buffered.
//
// CPU: enmime's cost grows with the square of the number of parts, so the
// MIME structure is checked first by a linear scan of the raw message
// (prescan.go): more parts than MaxParts (552 5.3.4), multiparts nested
// deeper than MaxDepth (554 5.6.0) or more stray bytes in base64 parts
// than MaxBase64Errors (554 5.6.0) are refused before enmime runs, and
// the parse itself stops at ParseTimeout (451 4.3.0). The same scan bounds
// every header section (MaxHeaderBytes) and header field
// (MaxHeaderFieldBytes), 552 5.3.4 beyond, before any header parser or the
// sender checks read them: go-msgauth's DKIM header reader is quadratic in
// a field's continuation lines. The DKIM check is bounded on top of that
// (auth.go: five signatures, the copying and field lookups it would do,
// its reads stop at ParseTimeout). A line over 2,000 bytes is refused with
// 554 5.6.0 while DATA is read. Connections are capped overall and per
// client IP (421 4.7.0 at connect).
//
// Storage: text fields reach the Backend as valid UTF-8 without NUL bytes
// (replaced with U+FFFD, noted in Warnings); every message refused or
// failed after DATA is logged with its Message-ID and the reason.
package inbound
