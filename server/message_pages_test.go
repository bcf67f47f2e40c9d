package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/comm-gateway/comm/channels/email/mailhost"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/comm-gateway/comm/channels/email/domain"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/server"
	"github.com/comm-gateway/comm/store"
	"github.com/comm-gateway/comm/store/storetest"
)

// bigMail is a plain-text email to rcpt of about size bytes of text; i > 0
// answers mail 0 (References), so every mail joins its conversation.
func bigMail(rcpt string, i, size int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "From: Mallory <mallory@example.org>\r\nTo: <%s>\r\nSubject: big %d\r\nMessage-ID: <big-%d@example.org>\r\n", rcpt, i, i)
	if i > 0 {
		b.WriteString("In-Reply-To: <big-0@example.org>\r\nReferences: <big-0@example.org>\r\n")
	}
	b.WriteString("Date: Mon, 02 Jun 2025 10:00:00 +0000\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n")
	line := strings.Repeat(string(rune('a'+i%26)), 75) + "\r\n"
	for range size / len(line) {
		b.WriteString(line)
	}
	return []byte(b.String())
}

// restPage is one page of GET /v1/conversations/{id}/messages.
type restPage struct {
	ids   []string
	bytes int // of the messages' text
	body  int // of the answer
	next  string
}

var linkNext = regexp.MustCompile(`^<([^>]+)>; rel="next"$`)

// messagesPage reads one page of a conversation's messages over REST.
func (g *gateway) messagesPage(t *testing.T, key, path string) restPage {
	t.Helper()
	resp := g.do(t, request{Path: path, Key: key})
	if resp.Status != http.StatusOK {
		t.Fatalf("GET %s: status %d, body %.300s", path, resp.Status, resp.Body)
	}
	var ms []struct {
		ID   string `json:"id"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(resp.Body, &ms); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	p := restPage{body: len(resp.Body)}
	for _, m := range ms {
		p.ids = append(p.ids, m.ID)
		p.bytes += len(m.Text)
	}
	if l := resp.Header.Get("Link"); l != "" {
		m := linkNext.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("GET %s: Link %q", path, l)
		}
		p.next = m[1]
	}
	return p
}

// TestMessagePageBudget: 40 mails of about 900 KB in one conversation
// (an attacker needs no key to send them). A page of its messages asked
// with limit=500 over REST, or first: 500 over GraphQL, holds only the
// messages within the page budget (4 MiB), says that more follow (a Link
// rel="next" header; hasNextPage), and paging on returns the rest in order;
// the server's heap stays bounded. A message larger than the budget comes
// alone. Before the budget, the page held all 40 (36 MB) and said nothing.
func TestMessagePageBudget(t *testing.T) {
	// Not parallel: the heap is measured.
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		for _, c := range []struct {
			name   string
			budget int // 0: the default
			inbox  string
		}{{"default budget", 0, "big"}, {"budget below one message", 512 << 10, "big2"}} {
			t.Run(c.name, func(t *testing.T) {
				g := startGateway(t, cfg, setup{outbox: true, email: true, svc: messaging.Options{
					MessagePageBytes: c.budget}, mail: mailhost.Options{Resolver: domain.NewResolver("127.0.0.1:1")}})
				budget := c.budget
				if budget == 0 {
					budget = messaging.DefaultMessagePageBytes
				}
				sb := g.newSandbox(t, "big mail")
				resp := g.post(t, sb.APIKey, "/v1/connections", `{"channel":"email","config":{"address":"`+c.inbox+`"}}`)
				if resp.Status != http.StatusCreated {
					t.Fatalf("connect email: %d %s", resp.Status, resp.Body)
				}
				const n, size = 40, 900 << 10
				rcpt := c.inbox + "@mail.test"
				for i := range n {
					ok, err := g.Mail.DeliverLocal(context.Background(), "mallory@example.org", rcpt, bigMail(rcpt, i, size))
					if err != nil || !ok {
						t.Fatalf("deliver mail %d: %v %v", i, ok, err)
					}
				}
				var convs []conversation
				g.get(t, sb.APIKey, "/v1/conversations", &convs)
				if len(convs) != 1 {
					t.Fatalf("%d conversations, want the 40 mails in one", len(convs))
				}
				conv := convs[0].ID
				// The messages in order, read by small pages (2 fit any budget here but the smallest).
				var want []string
				for path := "/v1/conversations/" + conv + "/messages?limit=1"; path != ""; {
					p := g.messagesPage(t, sb.APIKey, path)
					want = append(want, p.ids...)
					path = p.next
				}
				if len(want) != n {
					t.Fatalf("paging by 1 found %d messages, want %d", len(want), n)
				}

				// REST: limit=500.
				var got []string
				pages, maxBody := 0, 0
				path := "/v1/conversations/" + conv + "/messages?limit=500"
				base, peak := heapDuring(func() {
					p := g.messagesPage(t, sb.APIKey, path)
					got, path, maxBody, pages = p.ids, p.next, p.body, 1
					if p.bytes > budget && len(p.ids) != 1 {
						t.Errorf("first page: %d messages of %d bytes, over the budget of %d", len(p.ids), p.bytes, budget)
					}
				})
				t.Logf("REST limit=500: first page %d messages, %d bytes of answer; server heap %d MB before, peak +%.1f MB",
					len(got), maxBody, base/mib, float64(peak-base)/mib)
				if len(got) == 0 || len(got) >= n || path == "" {
					t.Fatalf("the first page has %d of %d messages, next %q: want fewer, and a Link to the rest", len(got), n, path)
				}
				if grew := peak - base; grew > 48*mib {
					t.Errorf("the server's heap grew by %d MB answering one page", grew/mib)
				}
				if u, err := url.Parse(path); err != nil || u.Query().Get("after") != got[len(got)-1] || u.Query().Get("limit") != "500" {
					t.Errorf("Link to %q after a page ending with %s", path, got[len(got)-1])
				}
				for path != "" {
					p := g.messagesPage(t, sb.APIKey, path)
					if len(p.ids) == 0 || (p.bytes > budget && len(p.ids) != 1) {
						t.Fatalf("page %s: %d messages of %d bytes (budget %d)", path, len(p.ids), p.bytes, budget)
					}
					if c.budget != 0 && len(p.ids) != 1 {
						t.Errorf("page %s: %d messages each larger than the budget; want one", path, len(p.ids))
					}
					got = append(got, p.ids...)
					maxBody = max(maxBody, p.body)
					path = p.next
					pages++
				}
				if strings.Join(got, ",") != strings.Join(want, ",") {
					t.Errorf("paging with limit=500 returned %d messages, not the %d in order", len(got), n)
				}
				t.Logf("REST limit=500: %d pages, largest answer %d bytes", pages, maxBody)

				// GraphQL: messages(first: 500) of the conversation.
				q := `query($c: String!, $after: Cursor) { messages(first: 500, after: $after, where: {conversationID: $c}) {
					edges { cursor node { id text } } pageInfo { hasNextPage endCursor } } }`
				type gqlPage struct {
					Messages struct {
						Edges []struct {
							Cursor string `json:"cursor"`
							Node   struct {
								ID   string `json:"id"`
								Text string `json:"text"`
							} `json:"node"`
						} `json:"edges"`
						PageInfo struct {
							HasNextPage bool    `json:"hasNextPage"`
							EndCursor   *string `json:"endCursor"`
						} `json:"pageInfo"`
					} `json:"messages"`
				}
				var gotQL []string
				var after any
				for pages = 0; ; pages++ {
					var p gqlPage
					vars := map[string]any{"c": conv, "after": after}
					var res gqlResult
					b, pk := heapDuring(func() { res = g.gql(t, sb.APIKey, q, vars) })
					if res.Status != http.StatusOK || len(res.Errors) > 0 {
						t.Fatalf("GraphQL page %d: status %d, body %.300s", pages, res.Status, res.Body)
					}
					decodeJSON(t, res.Data, &p)
					if pages == 0 {
						t.Logf("GraphQL first: 500: first page %d messages, %d bytes of answer; server heap peak +%.1f MB",
							len(p.Messages.Edges), len(res.Body), float64(pk-b)/mib)
						if grew := pk - b; grew > 48*mib {
							t.Errorf("the server's heap grew by %d MB answering one GraphQL page", grew/mib)
						}
					}
					bytes := 0
					for _, e := range p.Messages.Edges {
						gotQL = append(gotQL, e.Node.ID)
						bytes += len(e.Node.Text)
					}
					if len(p.Messages.Edges) == 0 || (bytes > budget && len(p.Messages.Edges) != 1) {
						t.Fatalf("GraphQL page %d: %d messages of %d bytes (budget %d)", pages, len(p.Messages.Edges), bytes, budget)
					}
					if !p.Messages.PageInfo.HasNextPage {
						break
					}
					if pages == 0 && len(p.Messages.Edges) >= n {
						t.Fatalf("the first GraphQL page holds all %d messages", n)
					}
					after = *p.Messages.PageInfo.EndCursor
				}
				if strings.Join(gotQL, ",") != strings.Join(want, ",") {
					t.Errorf("paging over GraphQL returned %d messages, not the %d in order", len(gotQL), n)
				}
				t.Logf("GraphQL first: 500: %d pages", pages+1)

				// Backwards: last: 500 before the end holds the newest
				// messages within the budget, with hasPreviousPage.
				var back struct {
					Messages struct {
						Edges []struct {
							Node struct {
								ID   string `json:"id"`
								Text string `json:"text"`
							} `json:"node"`
						} `json:"edges"`
						PageInfo struct {
							HasPreviousPage bool `json:"hasPreviousPage"`
						} `json:"pageInfo"`
					} `json:"messages"`
				}
				g.gqlOK(t, sb.APIKey, `query($c: String!) { messages(last: 500, where: {conversationID: $c}) {
					edges { node { id text } } pageInfo { hasPreviousPage } } }`, map[string]any{"c": conv}, &back)
				e := back.Messages.Edges
				if k := len(e); k == 0 || k >= n || !back.Messages.PageInfo.HasPreviousPage || e[k-1].Node.ID != want[n-1] || e[0].Node.ID != want[n-k] {
					t.Errorf("last: 500: %d messages, hasPreviousPage %v; want the newest within the budget", k, back.Messages.PageInfo.HasPreviousPage)
				}

				// A page of ids only loads no text and is not cut.
				var ids struct {
					Messages struct {
						Edges []struct {
							Node struct {
								ID string `json:"id"`
							} `json:"node"`
						} `json:"edges"`
						PageInfo struct {
							HasNextPage bool `json:"hasNextPage"`
						} `json:"pageInfo"`
					} `json:"messages"`
				}
				g.gqlOK(t, sb.APIKey, `query($c: String!) { messages(first: 500, where: {conversationID: $c}) {
					edges { node { id } } pageInfo { hasNextPage } } }`, map[string]any{"c": conv}, &ids)
				if len(ids.Messages.Edges) != n || ids.Messages.PageInfo.HasNextPage {
					t.Errorf("a page of ids: %d messages, hasNextPage %v; want all %d", len(ids.Messages.Edges), ids.Messages.PageInfo.HasNextPage, n)
				}
			})
		}
	})
}

// TestConversationPageBudget: a mail's Subject is bounded only by the
// mail's size, and every new mail starts a conversation, so anyone can
// make conversations as large as a header field allows. 12 mails with a 120 KB subject each: a
// page of conversations asked with limit=500 (REST) or first: 500
// (GraphQL) holds only those within the page budget, says more follow,
// and paging on returns the rest in order. Before the budget the page
// held all 12 (1.4 MB, 12 MB with 1 MB subjects before header fields were bounded).
func TestConversationPageBudget(t *testing.T) {
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		// A header field is at most 128 KiB (--smtp-max-header-field-bytes):
		// subjects of 120 KB against a page budget of 512 KiB.
		budget := 512 << 10
		g := startGateway(t, cfg, setup{outbox: true, email: true, svc: messaging.Options{MessagePageBytes: budget}, mail: mailhost.Options{Resolver: domain.NewResolver("127.0.0.1:1")}})
		sb := g.newSandbox(t, "big subjects")
		resp := g.post(t, sb.APIKey, "/v1/connections", `{"channel":"email","config":{"address":"subjects"}}`)
		if resp.Status != http.StatusCreated {
			t.Fatalf("connect email: %d %s", resp.Status, resp.Body)
		}
		const n = 12
		rcpt := "subjects@mail.test"
		for i := range n {
			var b strings.Builder
			fmt.Fprintf(&b, "From: <mallory@example.org>\r\nTo: <%s>\r\nMessage-ID: <subj-%d@example.org>\r\nSubject: %d", rcpt, i, i)
			for range (120 << 10) / 72 {
				b.WriteString("\r\n " + strings.Repeat("s", 70))
			}
			b.WriteString("\r\nContent-Type: text/plain\r\n\r\nhi\r\n")
			if ok, err := g.Mail.DeliverLocal(context.Background(), "mallory@example.org", rcpt, []byte(b.String())); err != nil || !ok {
				t.Fatalf("deliver mail %d: %v %v", i, ok, err)
			}
		}
		type conv struct {
			ID      string `json:"id"`
			Subject string `json:"subject"`
		}
		read := func(path string) (cs []conv, next string, body int) {
			resp := g.do(t, request{Path: path, Key: sb.APIKey})
			if resp.Status != http.StatusOK {
				t.Fatalf("GET %s: %d %.300s", path, resp.Status, resp.Body)
			}
			var raw []json.RawMessage
			if err := json.Unmarshal(resp.Body, &raw); err != nil {
				t.Fatal(err)
			}
			for _, r := range raw {
				var c conv
				if err := json.Unmarshal(r, &c); err != nil {
					t.Fatal(err)
				}
				cs = append(cs, c)
			}
			if l := resp.Header.Get("Link"); l != "" {
				m := linkNext.FindStringSubmatch(l)
				if m == nil {
					t.Fatalf("Link %q", l)
				}
				next = m[1]
			}
			return cs, next, len(resp.Body)
		}
		var want []string
		for path := "/v1/conversations?limit=1"; path != ""; {
			cs, next, _ := read(path)
			for _, c := range cs {
				want = append(want, c.ID)
			}
			path = next
		}
		if len(want) != n {
			t.Fatalf("paging by 1 found %d conversations, want %d", len(want), n)
		}
		var got []string
		for path, pages := "/v1/conversations?limit=500", 0; path != ""; pages++ {
			cs, next, body := read(path)
			bytes := 0
			for _, c := range cs {
				got = append(got, c.ID)
				bytes += len(c.Subject)
			}
			if pages == 0 {
				t.Logf("REST conversations limit=500: first page %d conversations, %d bytes of answer", len(cs), body)
				if len(cs) >= n || next == "" {
					t.Fatalf("the first page holds %d of %d conversations, next %q: want fewer and a Link", len(cs), n, next)
				}
			}
			if len(cs) == 0 || (bytes > budget && len(cs) != 1) {
				t.Fatalf("page %s: %d conversations of %d bytes (budget %d)", path, len(cs), bytes, budget)
			}
			path = next
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("paging with limit=500 returned %d conversations, not the %d in order", len(got), n)
		}

		var gotQL []string
		var after any
		for pages := 0; ; pages++ {
			var p struct {
				Conversations struct {
					Edges []struct {
						Node conv `json:"node"`
					} `json:"edges"`
					PageInfo struct {
						HasNextPage bool    `json:"hasNextPage"`
						EndCursor   *string `json:"endCursor"`
					} `json:"pageInfo"`
				} `json:"conversations"`
			}
			g.gqlOK(t, sb.APIKey, `query($after: Cursor) { conversations(first: 500, after: $after) {
				edges { node { id subject } } pageInfo { hasNextPage endCursor } } }`, map[string]any{"after": after}, &p)
			bytes := 0
			for _, e := range p.Conversations.Edges {
				gotQL = append(gotQL, e.Node.ID)
				bytes += len(e.Node.Subject)
			}
			if len(p.Conversations.Edges) == 0 || (bytes > budget && len(p.Conversations.Edges) != 1) {
				t.Fatalf("GraphQL page %d: %d conversations of %d bytes", pages, len(p.Conversations.Edges), bytes)
			}
			if pages == 0 && len(p.Conversations.Edges) >= n {
				t.Fatalf("the first GraphQL page holds all %d conversations", n)
			}
			if !p.Conversations.PageInfo.HasNextPage {
				break
			}
			after = *p.Conversations.PageInfo.EndCursor
		}
		if strings.Join(gotQL, ",") != strings.Join(want, ",") {
			t.Errorf("paging over GraphQL returned %d conversations, not the %d in order", len(gotQL), n)
		}
	})
}

// TestConnectionListReadsNoConfig: a connection's config is stored as the
// caller sent it (a test connection takes {} with any amount of
// whitespace, up to the body limit), and a list of connections does not
// show it, so it does not read it either: 60 connections with 900 KB
// configs are listed over REST and GraphQL without the server's heap
// growing by their 54 MB. (Before, REST read them: +82 MB. GraphQL read
// only the columns asked for, and now never reads the config.)
func TestConnectionListReadsNoConfig(t *testing.T) {
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		g := start(t, cfg, server.Options{WritesPerSecond: -1})
		sb := g.newSandbox(t, "big configs")
		const n = 60
		body := `{"channel":"test","config":{` + strings.Repeat(" ", 900<<10) + `}}`
		for i := range n {
			if resp := g.post(t, sb.APIKey, "/v1/connections", body); resp.Status != http.StatusCreated {
				t.Fatalf("connection %d: %d %.300s", i, resp.Status, resp.Body)
			}
		}
		var rest []json.RawMessage
		base, peak := heapDuring(func() { g.get(t, sb.APIKey, "/v1/connections?limit=500", &rest) })
		t.Logf("REST connections limit=500: %d connections; server heap peak +%.1f MB", len(rest), float64(peak-base)/mib)
		if len(rest) != n {
			t.Errorf("%d connections listed, want %d", len(rest), n)
		}
		if grew := peak - base; grew > 24*mib {
			t.Errorf("listing connections grew the heap by %d MB", grew/mib)
		}
		var ql struct {
			Connections struct {
				Edges []struct {
					Node struct {
						ID       string `json:"id"`
						Typename string `json:"__typename"`
					} `json:"node"`
				} `json:"edges"`
			} `json:"connections"`
		}
		base, peak = heapDuring(func() {
			g.gqlOK(t, sb.APIKey, `{ connections(first: 500) { edges { node { id __typename } } } }`, nil, &ql)
		})
		t.Logf("GraphQL connections(first: 500): %d connections; server heap peak +%.1f MB", len(ql.Connections.Edges), float64(peak-base)/mib)
		if len(ql.Connections.Edges) != n {
			t.Errorf("%d connections over GraphQL, want %d", len(ql.Connections.Edges), n)
		}
		if grew := peak - base; grew > 24*mib {
			t.Errorf("listing connections over GraphQL grew the heap by %d MB", grew/mib)
		}
	})
}

// TestDomainPageBudget: a page of custom domains has the byte budget too
// (a domain's checks hold the TXT strings its owner publishes): with a
// budget below one domain, limit=500 answers one domain at a time with a
// Link to the next, over REST, and GraphQL's domains pages the same way.
func TestDomainPageBudget(t *testing.T) {
	storetest.Run(t, func(t *testing.T, cfg store.Config) {
		g := startGateway(t, cfg, setup{outbox: true, email: true, svc: messaging.Options{MessagePageBytes: 1}, mail: mailhost.Options{Resolver: domain.NewResolver("127.0.0.1:1")}})
		sb := g.newSandbox(t, "domains")
		var want []string
		for _, d := range []string{"a.example.com", "b.example.com", "c.example.com"} {
			resp := g.post(t, sb.APIKey, "/v1/domains", `{"domain":"`+d+`"}`)
			if resp.Status != http.StatusCreated {
				t.Fatalf("add %s: %d %s", d, resp.Status, resp.Body)
			}
			var v struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(resp.Body, &v); err != nil {
				t.Fatal(err)
			}
			want = append(want, v.ID)
		}
		var got []string
		for path := "/v1/domains?limit=500"; path != ""; {
			resp := g.do(t, request{Path: path, Key: sb.APIKey})
			var ds []struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(resp.Body, &ds); resp.Status != http.StatusOK || err != nil || len(ds) != 1 {
				t.Fatalf("GET %s: %d, %d domains (%v): %.300s", path, resp.Status, len(ds), err, resp.Body)
			}
			got = append(got, ds[0].ID)
			path = ""
			if l := resp.Header.Get("Link"); l != "" {
				path = linkNext.FindStringSubmatch(l)[1]
			}
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("domains paged %v, want %v", got, want)
		}
		got = nil
		var after any
		for range 4 {
			var p struct {
				Domains []struct {
					ID string `json:"id"`
				} `json:"domains"`
			}
			g.gqlOK(t, sb.APIKey, `query($a: ID) { domains(after: $a, limit: 500) { id } }`, map[string]any{"a": after}, &p)
			if len(p.Domains) == 0 {
				break
			}
			if len(p.Domains) != 1 {
				t.Fatalf("GraphQL domains: %d on a page", len(p.Domains))
			}
			got = append(got, p.Domains[0].ID)
			after = p.Domains[0].ID
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("GraphQL domains paged %v, want %v", got, want)
		}
	})
}
