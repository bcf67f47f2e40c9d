// Package netguard makes outbound HTTP to user-supplied URLs (push webhooks)
// safe against server-side request forgery.
//
// It guards at two points:
//
//   - Registration: [CheckURL] validates a webhook URL before it is stored
//     (https only, no credentials, no fragment, no private IP literal, no
//     localhost), returning a [*URLError] the front door maps to HTTP 400.
//   - Connection: the [http.Client] from [NewClient] checks the IP address of
//     every connection it opens, after DNS resolution, and refuses private,
//     loopback, link-local (cloud metadata) and other non-public ranges (see
//     [Refused]) with an error wrapping [ErrRefused]. It never follows
//     redirects and never uses a proxy from the environment.
//
// Response bodies from receivers are untrusted and may be huge: read them with
// [ReadLimited] or [ReadBody], which never read more than a small prefix.
package netguard
