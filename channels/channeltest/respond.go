package channeltest

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/comm-gateway/comm/channels"
)

// respond calls Respond the way the gateway does: before ParseWebhook,
// with the body read.
func (q request) respond(a channels.Responder) (*channels.Response, error) {
	r := q.r.Clone(q.r.Context())
	r.Body = http.NoBody
	return a.Respond(r, bytes.Clone(q.body))
}

// route calls an app-level webhook's Route the way the gateway does.
func (q request) route(app channels.AppWebhook) (routed, error) {
	r := q.r.Clone(q.r.Context())
	r.Body = http.NoBody
	keys, resp, err := app.Route(r, bytes.Clone(q.body))
	return routed{keys, resp}, err
}

// routed is what Route returned besides its error.
type routed struct {
	keys []string
	resp *channels.Response
}

// bare is a request with no signature, no query and no headers: what
// anyone on the internet can send to an ingress.
func bare(method, path string, body []byte) request {
	return request{r: httptest.NewRequest(method, path, bytes.NewReader(body)), body: body}
}

// withBody is q carrying another body (its signature, if any, was for the
// old one).
func (q request) withBody(body []byte) request {
	return request{r: q.r, body: body}
}

// altered is q with its body changed: from with to where it occurs, else a
// space appended.
func (q request) altered(from, to string) request {
	b := bytes.Replace(q.body, []byte(from), []byte(to), 1)
	if bytes.Equal(b, q.body) {
		b = append(bytes.Clone(q.body), ' ')
	}
	return q.withBody(b)
}

// checkResponse compares an answer with the one the provider expects.
func checkResponse(t *testing.T, what string, got *channels.Response, want channels.Response) {
	t.Helper()
	status := func(r channels.Response) int {
		if r.Status == 0 {
			return http.StatusOK
		}
		return r.Status
	}
	if status(*got) != status(want) {
		t.Errorf("%s: status %d, the provider expects %d", what, status(*got), status(want))
	}
	if !bytes.Equal(got.Body, want.Body) {
		t.Errorf("%s: body %s, the provider expects %s", what, clip(got.Body), clip(want.Body))
	}
	for k, vs := range want.Header {
		if g := got.Header.Values(k); !slices.Equal(g, vs) {
			t.Errorf("%s: header %s = %q, the provider expects %q", what, k, g, vs)
		}
	}
}

func showResponse(r *channels.Response) string {
	if r == nil {
		return "nil"
	}
	return fmt.Sprintf("{Status:%d Header:%v Body:%s}", r.Status, r.Header, clip(r.Body))
}

func testRespond(t *testing.T, h Harness) {
	e := setup(t, h)
	rs, ok := e.a.(channels.Responder)
	if !ok {
		t.Skip("the adapter is not a channels.Responder")
	}
	respond := func(q request, what string) (*channels.Response, error) {
		t.Helper()
		return call(t, "Respond("+what+")", func() (*channels.Response, error) { return q.respond(rs) })
	}
	hookPath := "/hooks/" + h.Descriptor.Channel + "/conn_channeltest"

	// The handshake gets the answer the provider expects.
	req, want := e.fake.Handshake(t)
	hs := read(t, req, "Handshake")
	resp, err := respond(hs, "handshake")
	switch {
	case err != nil:
		t.Fatalf("Respond to the provider's handshake (Fake.Handshake, %s %s): %v", hs.r.Method, hs.r.URL, err)
	case resp == nil:
		t.Fatalf("Respond to the provider's handshake (Fake.Handshake, %s %s) returned nil: the gateway would hand it to ParseWebhook, and the provider would never hear %s",
			hs.r.Method, hs.r.URL, showResponse(&want))
	}
	checkResponse(t, "Respond to the handshake", resp, want)

	// A tampered handshake is refused.
	if e.fake.Tamper == nil {
		if h.Unsigned == "" {
			t.Fatal("channeltest: Fake.Tamper is nil; set it, or set Harness.Unsigned to say why provider requests carry no signature")
		}
		t.Logf("tampered handshakes not checked: %s", h.Unsigned)
	} else {
		req, _ := e.fake.Handshake(t)
		expectRespondSignatureError(t, rs, read(t, e.fake.Tamper(t, req), "Tamper"), "a handshake with a broken signature (Fake.Tamper)")
		if len(hs.body) > 0 && h.BodyUnsigned == "" {
			expectRespondSignatureError(t, rs, hs.altered("challenge", "challengf"), "a correctly signed handshake whose body was altered")
		}
		// Anyone can send a bare request; it gets no answer.
		for _, q := range []request{bare(http.MethodGet, hookPath, nil), bare(http.MethodPost, hookPath, hs.body), bare(http.MethodPost, hookPath, []byte("{}"))} {
			if resp, err := respond(q, "an unsigned request"); err == nil && resp != nil {
				t.Errorf("Respond answered %s %s with no signature and body %s: %s; only a verified handshake gets an answer",
					q.r.Method, q.r.URL, clip(q.body), showResponse(resp))
			}
		}
	}

	// An ordinary message goes on to ParseWebhook.
	if wr, ok := e.a.(channels.WebhookReceiver); ok {
		m := channels.Inbound{ProviderID: "ct-respond", Sender: e.fake.sender(), Text: "An ordinary message after a handshake."}
		q := e.request(t, m)
		resp, err := respond(q, "an inbound message")
		switch {
		case err != nil:
			t.Errorf("Respond to an ordinary, correctly signed inbound request (Fake.Inbound): %v; want nil, so that it goes on to ParseWebhook", err)
		case resp != nil:
			t.Errorf("Respond answered an ordinary inbound request itself (%s); its message would never reach ParseWebhook", showResponse(resp))
		default:
			if in := e.parseOne(t, wr, q); in.Text != m.Text {
				t.Errorf("after Respond passed it on, ParseWebhook gave Text %q, want %q", in.Text, m.Text)
			}
		}
		if e.fake.Tamper != nil {
			tq := read(t, e.fake.Tamper(t, e.fake.Inbound(t, m)), "Tamper")
			if resp, err := respond(tq, "a tampered inbound message"); err == nil && resp != nil {
				t.Errorf("Respond answered an inbound request with a broken signature (Fake.Tamper): %s", showResponse(resp))
			}
		}
	}

	// Garbage never panics.
	var shapes []request
	for _, body := range append(slices.Clone(garbage), oddShapes...) {
		shapes = append(shapes, hs.withBody(body), bare(http.MethodPost, hookPath, body))
		if e.fake.Inbound != nil {
			shapes = append(shapes, e.rawRequest(t, body))
		}
	}
	for _, q := range shapes {
		respond(q, fmt.Sprintf("%s %s with body %s", q.r.Method, q.r.URL, clip(q.body)))
	}
}

func expectRespondSignatureError(t *testing.T, a channels.Responder, q request, what string) {
	t.Helper()
	resp, err := call(t, "Respond", func() (*channels.Response, error) { return q.respond(a) })
	switch {
	case err == nil && resp != nil:
		t.Errorf("Respond answered %s: %s", what, showResponse(resp))
	case err == nil:
		t.Errorf("Respond passed %s on to ParseWebhook (nil); want an error wrapping channels.ErrSignature", what)
	case !errors.Is(err, channels.ErrSignature):
		t.Errorf("Respond to %s: error %q does not wrap channels.ErrSignature", what, err)
	case resp != nil:
		t.Errorf("Respond to %s returned an answer with its error: %s", what, showResponse(resp))
	}
}

// tenant is one provisioned connection of an app-level channel.
type tenant struct {
	e   *env
	key string
	wr  channels.WebhookReceiver
}

// provisionTenant provisions the adapter of config, as the gateway does
// when the connection is made, and builds it again from what Provision
// returned.
func (e *env) provisionTenant(t *testing.T, config []byte, what string) tenant {
	t.Helper()
	a, err := call(t, "New", func() (channels.Adapter, error) {
		return e.h.Descriptor.New(t.Context(), connection(config, e.fake.WebhookURL))
	})
	if err != nil {
		t.Fatalf("New with %s: %v", what, err)
	}
	if c, ok := a.(channels.Closer); ok {
		t.Cleanup(func() { _ = c.Close() })
	}
	p, ok := a.(channels.Provisioner)
	if !ok {
		t.Fatal("the descriptor has an app-level webhook (Descriptor.App), which routes by Provisioned.RouteKey, but the adapter is not a channels.Provisioner")
	}
	res, err := call(t, "Provision", func() (channels.Provisioned, error) { return p.Provision(t.Context()) })
	if err != nil {
		t.Fatalf("Provision with %s: %v", what, err)
	}
	if res.RouteKey == "" {
		t.Fatalf("Provision with %s registered no Provisioned.RouteKey; the app-level webhook (Descriptor.App) could route no event to it", what)
	}
	if res.Config == nil {
		res.Config = config
	}
	n := (&env{h: e.h, fake: e.fake, a: a}).renew(t, res)
	wr, ok := n.a.(channels.WebhookReceiver)
	if !ok {
		t.Fatal("the descriptor has an app-level webhook (Descriptor.App) but the provisioned adapter is not a channels.WebhookReceiver; the gateway would hand its events to nobody")
	}
	return tenant{e: n, key: res.RouteKey, wr: wr}
}

func testApp(t *testing.T, h Harness) {
	app := h.Descriptor.App
	if app == nil {
		t.Skip("the descriptor has no app-level webhook (Descriptor.App)")
	}
	e := setup(t, h)
	f := e.fake
	switch {
	case f.AppInbound == nil:
		t.Fatal("channeltest: Descriptor.App is set but Fake.AppInbound is nil")
	case f.OtherTenant == nil:
		t.Fatal("channeltest: Descriptor.App is set but Fake.OtherTenant is nil; the suite checks that one tenant's events never reach another")
	}
	tamper := f.AppTamper
	if tamper == nil {
		tamper = f.Tamper
	}
	if tamper == nil {
		t.Fatal("channeltest: Descriptor.App is set but Fake.AppTamper and Fake.Tamper are nil; an app-level webhook must verify what it routes")
	}
	route := func(q request, what string) (routed, error) {
		t.Helper()
		return call(t, "Route("+what+")", func() (routed, error) { return q.route(app) })
	}

	one := e.provisionTenant(t, f.Config, "Fake.Config")
	if f.RouteKey != "" && one.key != f.RouteKey {
		t.Errorf("Provision registered the route key %q, want %q (Fake.RouteKey)", one.key, f.RouteKey)
	}
	two := e.provisionTenant(t, f.OtherTenant, "Fake.OtherTenant")
	if one.key == two.key {
		t.Fatalf("Fake.Config and Fake.OtherTenant both registered the route key %q; they must be two tenants", one.key)
	}

	// Each tenant's event is routed to it, and only it takes the message.
	sender := f.sender()
	var signed request
	for i, p := range [][2]tenant{{one, two}, {two, one}} {
		self, other := p[0], p[1]
		m := channels.Inbound{ProviderID: fmt.Sprintf("ct-app-%d", i+1), Sender: sender,
			Text: fmt.Sprintf("App-level message %d for %s: tamper-me.", i+1, self.key)}
		q := read(t, f.AppInbound(t, self.key, m), "AppInbound")
		if i == 0 {
			signed = q
		}
		res, err := route(q, "an event")
		switch {
		case err != nil:
			t.Fatalf("Route of a correctly signed app-level event for %q (Fake.AppInbound): %v", self.key, err)
		case res.resp != nil:
			t.Errorf("Route answered an app-level event for %q itself (%s); its message would never reach the connection", self.key, showResponse(res.resp))
		case !slices.Contains(res.keys, self.key):
			t.Errorf("Route gave the keys %q for an event of the connection that registered %q; the gateway would not find the connection", res.keys, self.key)
		case slices.Contains(res.keys, other.key):
			t.Errorf("Route gave the keys %q for an event of %q only: it names the other tenant %q too", res.keys, self.key, other.key)
		}
		if in := self.e.parseOne(t, self.wr, q); in.Text != m.Text || in.Sender != m.Sender {
			t.Errorf("the connection of %q parsed its app-level event as %s, want Sender %q Text %q", self.key, showInbound(in), m.Sender, m.Text)
		}
		ins, err := call(t, "ParseWebhook", func() ([]channels.Inbound, error) { return q.parse(other.wr) })
		switch {
		case len(ins) != 0:
			t.Errorf("the connection of %q returned another tenant's message (an event for %q): %s; events of one tenant must never reach another",
				other.key, self.key, showInbounds(ins))
		case err != nil:
			t.Errorf("the connection of %q failed on an app-level event for %q: %v; it must return none and no error (the gateway hands one request to every connection it names)",
				other.key, self.key, err)
		}
	}

	// Route verifies before it names a tenant.
	m := channels.Inbound{ProviderID: "ct-app-sig", Sender: sender, Text: "Signed app-level text: tamper-me."}
	expectRouteSignatureError(t, app, read(t, tamper(t, f.AppInbound(t, one.key, m)), "AppTamper"), "an app-level event with a broken signature")
	expectRouteSignatureError(t, app, signed.altered(one.key, two.key), "a correctly signed app-level event rewritten to name another tenant")
	expectRouteSignatureError(t, app, signed.altered("tamper-me", "tamper-us"), "a correctly signed app-level event whose body was altered")
	// The connection's own ingress (/hooks/<channel>/<id>) hands requests
	// to ParseWebhook without Route: the adapter verifies app-level
	// requests too.
	expectSignatureError(t, one.wr, read(t, tamper(t, f.AppInbound(t, one.key, m)), "AppTamper"),
		"an app-level event with a broken signature (the connection's own ingress calls ParseWebhook without Route)")

	// The app answers its handshake.
	if f.AppHandshake != nil {
		req, want := f.AppHandshake(t)
		hs := read(t, req, "AppHandshake")
		res, err := route(hs, "handshake")
		switch {
		case err != nil:
			t.Errorf("Route of the app-level handshake (Fake.AppHandshake, %s %s): %v", hs.r.Method, hs.r.URL, err)
		case res.resp == nil:
			t.Errorf("Route of the app-level handshake (Fake.AppHandshake) gave no answer (keys %q); the provider expects %s", res.keys, showResponse(&want))
		default:
			checkResponse(t, "Route's answer to the app-level handshake", res.resp, want)
		}
		req, _ = f.AppHandshake(t)
		expectRouteSignatureError(t, app, read(t, tamper(t, req), "AppTamper"), "an app-level handshake with a broken signature")
	} else {
		t.Log("Fake.AppHandshake is nil: the app-level handshake is not checked")
	}

	// Garbage and unsigned requests choose no tenant and never panic.
	appPath := "/hooks/" + h.Descriptor.Channel
	shapes := []request{bare(http.MethodGet, appPath, nil), bare(http.MethodPost, appPath, signed.body)}
	for _, body := range append(slices.Clone(garbage), oddShapes...) {
		shapes = append(shapes, signed.withBody(body), bare(http.MethodPost, appPath, body))
	}
	for _, q := range shapes {
		res, err := route(q, fmt.Sprintf("%s %s with body %s", q.r.Method, q.r.URL, clip(q.body)))
		if err == nil && (len(res.keys) != 0 || res.resp != nil) {
			t.Errorf("Route of an unverified request (%s %s, body %s) gave keys %q and answer %s; an unverified payload never chooses a tenant",
				q.r.Method, q.r.URL, clip(q.body), res.keys, showResponse(res.resp))
		}
	}
}

func expectRouteSignatureError(t *testing.T, app channels.AppWebhook, q request, what string) {
	t.Helper()
	res, err := call(t, "Route", func() (routed, error) { return q.route(app) })
	switch {
	case err == nil:
		t.Errorf("Route accepted %s: keys %q, answer %s", what, res.keys, showResponse(res.resp))
	case !errors.Is(err, channels.ErrSignature):
		t.Errorf("Route of %s: error %q does not wrap channels.ErrSignature", what, err)
	case len(res.keys) != 0 || res.resp != nil:
		t.Errorf("Route of %s returned keys %q and answer %s with its error", what, res.keys, showResponse(res.resp))
	}
}
