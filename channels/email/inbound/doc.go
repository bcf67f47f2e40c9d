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
package inbound
