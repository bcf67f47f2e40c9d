package messaging

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/comm-gateway/comm/api"
	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/ent"
	entbinding "github.com/comm-gateway/comm/ent/binding"
	entconn "github.com/comm-gateway/comm/ent/connection"
	entlease "github.com/comm-gateway/comm/ent/lease"
	entanswer "github.com/comm-gateway/comm/ent/lineanswer"
	entmsg "github.com/comm-gateway/comm/ent/message"
	"github.com/comm-gateway/comm/ent/predicate"
	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/ident"
	"github.com/comm-gateway/comm/stream"
	"github.com/comm-gateway/comm/tenant"
)

// Shared lines (channels.SharedApp): the operator's own numbers and relay
// addresses, each shared by many projects' connections. A connection is
// put on a line when it is made: to itself (dedicated: the line is its
// routing key and everything that comes to the line is its own) or
// shared, with a join code. A person who sends "join <code>" to a shared
// line is bound to the connection with that code (one binding per person
// and line; a later join moves it); their messages go there, and only
// people bound to it may be written to through it.

// Join codes: JoinCodeLen characters of JoinCodeAlphabet (no 0/O, 1/I).
const (
	JoinCodeAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	JoinCodeLen      = 6
)

// Bounds of shared-line routing.
const (
	// AnswerEvery is how often a person bound to no connection is
	// answered on a line (how to join; that a code is not valid).
	AnswerEvery = time.Hour
	// MaxLineAnswers bounds the answers a line remembers; entries older
	// than a day are pruned whenever one is written.
	MaxLineAnswers = 10000
	// maxLineID and maxPerson bound what an adapter hands over as a line
	// id and a sender; longer ones are dropped.
	maxLineID = 200
	maxPerson = 1000
	// answerTimeout bounds one Answer call.
	answerTimeout = 10 * time.Second
)

// appDescriptor finds the descriptor of channel that has what ok asks
// for (an App, a Session): a channel with several providers ("whatsapp":
// twilio with per-connection hooks, hosted with the operator's app) has
// one that does.
func (s *Service) appDescriptor(channel string, ok func(channels.Descriptor) bool) (channels.Descriptor, bool) {
	for _, d := range s.channels.Descriptors() {
		if d.Channel == channel && ok(d) {
			return d, true
		}
	}
	return channels.Descriptor{}, false
}

// linePlace is the line Connect chose for a new connection.
type linePlace struct {
	line      channels.Line
	dedicated bool
	// named: the caller chose the line (config.line).
	named bool
}

// lineConfig is what the core reads of a shared channel's configuration
// (adapters ignore these keys).
type lineConfig struct {
	Dedicated json.RawMessage `json:"dedicated"`
	Line      json.RawMessage `json:"line"`
}

// placeOnLine chooses the line of a new connection of a shared channel:
// config.dedicated asks for a line of its own (one no live connection
// uses), config.line names one (by id or address). Otherwise the first
// line no connection has to itself.
func (s *Service) placeOnLine(ctx context.Context, d channels.Descriptor, config json.RawMessage) (*linePlace, error) {
	var lc lineConfig
	if len(config) > 0 && string(config) != "null" {
		if err := json.Unmarshal(config, &lc); err != nil {
			return nil, Invalid("config", "must be a JSON object: %v", err)
		}
	}
	place := &linePlace{}
	if len(lc.Dedicated) > 0 && string(lc.Dedicated) != "null" {
		if err := json.Unmarshal(lc.Dedicated, &place.dedicated); err != nil {
			return nil, Invalid("config.dedicated", "must be true or false")
		}
	}
	var want string
	if len(lc.Line) > 0 && string(lc.Line) != "null" {
		if err := json.Unmarshal(lc.Line, &want); err != nil || want == "" {
			return nil, Invalid("config.line", "must be a line's id or address (a string)")
		}
	}
	lines := d.Shared.Lines()
	if len(lines) == 0 {
		return nil, fault.Conflict("%s has no lines on this gateway: its operator configured none", label(d)).WithParam("config")
	}
	used, dedicated, err := s.linesInUse(ctx, d)
	if err != nil {
		return nil, err
	}
	if want != "" {
		for _, l := range lines {
			if l.ID == want || strings.EqualFold(l.Address, want) {
				place.line, place.named = l, true
				if dedicated[l.ID] || (place.dedicated && used[l.ID]) {
					return nil, lineTaken(d, place)
				}
				return place, nil
			}
		}
		return nil, Invalid("config.line", "%s has no line %q; its lines: %s", label(d), want, lineAddresses(lines))
	}
	for _, l := range lines {
		if dedicated[l.ID] || (place.dedicated && used[l.ID]) {
			continue
		}
		place.line = l
		return place, nil
	}
	return nil, lineTaken(d, place)
}

// linesInUse reports which lines of d live connections are on, and which
// of them one has to itself.
func (s *Service) linesInUse(ctx context.Context, d channels.Descriptor) (used, dedicated map[string]bool, err error) {
	cs, err := s.read.Connection.Query().
		Where(entconn.Channel(d.Channel), entconn.Provider(d.Provider), entconn.LineNotNil()).
		Select(entconn.FieldLine, entconn.FieldRouteKey).All(tenant.System(ctx))
	if err != nil {
		return nil, nil, err
	}
	used, dedicated = map[string]bool{}, map[string]bool{}
	for _, c := range cs {
		used[*c.Line] = true
		if c.RouteKey != nil {
			dedicated[*c.Line] = true
		}
	}
	return used, dedicated, nil
}

// checkLineFree checks again, in the transaction that stores the new
// connection, that its line is still as placeOnLine found it (another
// connection may have taken it since).
func (s *Service) checkLineFree(tx *stream.Tx, d channels.Descriptor, place *linePlace, connID string) error {
	// Connects on one line take turns: the line's lock row is written
	// first, so a concurrent connect on another replica waits for this
	// transaction and then sees its connection (READ COMMITTED reads
	// each statement afresh; SQLite has one writer anyway).
	ctx := tenant.System(tx.Context())
	err := tx.Client().Lease.Create().SetID("line:" + hashKey(d.Channel, d.Provider, place.line.ID)).SetOwner(connID).
		SetUntil(s.now()).OnConflictColumns(entlease.FieldID).UpdateOwner().UpdateUntil().Exec(ctx)
	if err != nil {
		return fmt.Errorf("lock line %s: %w", place.line.ID, err)
	}
	q := tx.Client().Connection.Query().Where(entconn.Channel(d.Channel), entconn.Provider(d.Provider),
		entconn.Line(place.line.ID), entconn.DeletedAtIsNil())
	if !place.dedicated {
		q = q.Where(entconn.RouteKeyNotNil())
	}
	taken, err := q.Exist(ctx)
	if err != nil {
		return err
	}
	if taken {
		return lineTaken(d, place)
	}
	return nil
}

// lineTaken is the conflict of a connection that finds no line.
func lineTaken(d channels.Descriptor, place *linePlace) error {
	switch {
	case place.named && place.dedicated:
		return fault.Conflict("the line %s of %s is in use by another connection; name another line in config.line, or leave config.dedicated out to share it",
			place.line.Address, label(d)).WithParam("config.line")
	case place.named:
		return fault.Conflict("the line %s of %s is dedicated to another connection; name another line in config.line, or leave config.line out",
			place.line.Address, label(d)).WithParam("config.line")
	case place.dedicated:
		return fault.Conflict("every line of %s is in use: none is left to dedicate to this connection; leave config.dedicated out to share a line (people join with a code)",
			label(d)).WithParam("config.dedicated")
	}
	return fault.Conflict("every line of %s is dedicated to a connection: none is left to share; ask the operator for another line",
		label(d)).WithParam("config")
}

func lineAddresses(lines []channels.Line) string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.Address
	}
	return strings.Join(out, ", ")
}

// newJoinCode draws a join code.
func newJoinCode() string {
	b := make([]byte, JoinCodeLen)
	rand.Read(b)
	for i := range b {
		b[i] = JoinCodeAlphabet[int(b[i])%len(JoinCodeAlphabet)] // 256 is a multiple of 32: uniform
	}
	return string(b)
}

// joinKey is the gateway-wide key of a join code on a line: unique among
// live connections.
func joinKey(d channels.Descriptor, line, code string) string {
	return d.Channel + "/" + d.Provider + ":" + line + ":" + strings.ToUpper(code)
}

// hashKey is an unambiguous fixed-size key of parts.
func hashKey(parts ...string) string {
	b, _ := json.Marshal(parts)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// bindingKey is a binding's scope_key: one per person and line.
func bindingKey(channel, provider, line, person string) string {
	return hashKey("binding", channel, provider, line, person)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// parseJoin reads a "join <code>" message (case-insensitive, trimmed).
func parseJoin(text string) (string, bool) {
	if len(text) > 100 {
		return "", false
	}
	f := strings.Fields(text)
	if len(f) != 2 || !strings.EqualFold(f[0], "join") {
		return "", false
	}
	return strings.ToUpper(f[1]), true
}

// onSharedLine reports whether c shares its line with other connections
// (people must join it before it may write to them).
func onSharedLine(c *ent.Connection) bool { return c.Line != nil && c.JoinCode != nil }

// lineRouter routes the items of one request (or one emit) of a shared
// channel, remembering what it looked up.
type lineRouter struct {
	s         *Service
	d         channels.Descriptor
	ctx       context.Context // system
	dedicated map[string]*ent.Connection
	bound     map[string]*ent.Connection // line + person -> connection
}

// routeLines routes the messages and receipts that came to d's lines: each
// to the line's dedicated connection, else to the connection its sender
// is bound to; "join <code>" binds the sender (and is not stored); a
// sender bound to nothing is answered how to join (at most once per
// AnswerEvery), and nothing is stored. A receipt goes to the connection
// on the line that sent the message. Each connection's messages are
// stored together (ReceiveBatch), in the order they came.
func (s *Service) routeLines(ctx context.Context, d channels.Descriptor, items []channels.LineInbound) error {
	r := &lineRouter{s: s, d: d, ctx: tenant.System(ctx),
		dedicated: map[string]*ent.Connection{}, bound: map[string]*ent.Connection{}}
	var order []*ent.Connection
	batches := map[string][]channels.Inbound{}
	for _, it := range items {
		c, err := r.route(it)
		if err != nil {
			return err
		}
		if c == nil {
			continue
		}
		if _, ok := batches[c.ID]; !ok {
			order = append(order, c)
		}
		batches[c.ID] = append(batches[c.ID], it.Inbound)
	}
	for _, c := range order {
		if err := s.ReceiveBatch(ctx, c, batches[c.ID]); err != nil {
			return fmt.Errorf("line %s: connection %s: store %d item(s): %w", deref(c.Line), c.ID, len(batches[c.ID]), err)
		}
	}
	return nil
}

// route returns the connection it is for, or nil when it is stored
// nowhere (a join, an unbound sender, a receipt of no known message).
func (r *lineRouter) route(it channels.LineInbound) (*ent.Connection, error) {
	s := r.s
	if it.Line == "" || len(it.Line) > maxLineID {
		s.unrouted.Add(1)
		s.logger.Info("shared line: an item names no line (or one too long); dropped", "channel", r.d.Channel)
		return nil, nil
	}
	if c, err := r.dedicatedTo(it.Line); c != nil || err != nil {
		return c, err
	}
	if it.Receipt != nil {
		c, err := r.sentBy(it.Line, it.Receipt.MessageID)
		if c == nil && err == nil {
			s.unrouted.Add(1)
			s.logger.Info("shared line: a receipt names no message of the line's connections; dropped",
				"channel", r.d.Channel, "line", it.Line)
		}
		return c, err
	}
	person := it.Sender
	if person == "" || len(person) > maxPerson {
		s.unrouted.Add(1)
		return nil, nil
	}
	code, isJoin := parseJoin(it.Text)
	if isJoin {
		target, err := r.byCode(it.Line, code)
		if err != nil {
			return nil, err
		}
		if target != nil {
			return nil, r.join(it.Line, person, target)
		}
	}
	c, err := r.boundTo(it.Line, person)
	if c != nil || err != nil {
		return c, err
	}
	s.unrouted.Add(1)
	noun := "number"
	if !strings.HasPrefix(r.address(it.Line), "+") && r.d.Channel != "whatsapp" {
		noun = "address"
	}
	kind, text := "help", fmt.Sprintf("This %s is shared. To reach an assistant, send the word join and the code you were given, like: join <code>", noun)
	if isJoin {
		kind, text = "invalid", fmt.Sprintf("That join code is not valid on this %s. Check the code you were given and send: join <code>", noun)
	}
	return nil, r.answerOnce(it.Line, person, kind, text)
}

// address is the address of a line of d, or "" when d does not list it.
func (r *lineRouter) address(line string) string {
	for _, l := range r.d.Shared.Lines() {
		if l.ID == line {
			return l.Address
		}
	}
	return ""
}

// dedicatedTo returns the live connection that has line to itself, or nil.
func (r *lineRouter) dedicatedTo(line string) (*ent.Connection, error) {
	if c, ok := r.dedicated[line]; ok {
		return c, nil
	}
	c, err := r.s.read.Connection.Query().Where(entconn.RouteKey(RouteKey(r.d.Channel, line))).Only(r.ctx)
	if ent.IsNotFound(err) {
		c, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	r.dedicated[line] = c
	return c, nil
}

// byCode returns the live connection on line whose join code is code.
func (r *lineRouter) byCode(line, code string) (*ent.Connection, error) {
	c, err := r.s.read.Connection.Query().Where(entconn.JoinKey(joinKey(r.d, line, code))).Only(r.ctx)
	if ent.IsNotFound(err) {
		return nil, nil
	}
	return c, err
}

// boundTo returns the live connection person is bound to on line, or nil.
func (r *lineRouter) boundTo(line, person string) (*ent.Connection, error) {
	key := bindingKey(r.d.Channel, r.d.Provider, line, person)
	if c, ok := r.bound[key]; ok {
		return c, nil
	}
	b, err := r.s.read.Binding.Query().Where(entbinding.ScopeKey(key)).Only(r.ctx)
	if ent.IsNotFound(err) {
		r.bound[key] = nil
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c, err := r.s.read.Connection.Query().Where(entconn.ID(b.ConnectionID)).Only(r.ctx)
	if ent.IsNotFound(err) {
		c, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	r.bound[key] = c
	return c, nil
}

// sentBy returns the live connection on line that sent the message the
// provider calls providerID.
func (r *lineRouter) sentBy(line, providerID string) (*ent.Connection, error) {
	cs, err := r.s.read.Connection.Query().
		Where(entconn.Channel(r.d.Channel), entconn.Provider(r.d.Provider), entconn.Line(line)).All(r.ctx)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*ent.Connection, len(cs))
	for len(cs) > 0 {
		n := min(len(cs), 100)
		ors := make([]predicate.Message, n)
		for i, c := range cs[:n] {
			byID[c.ID] = c
			ors[i] = entmsg.And(entmsg.ProjectID(c.ProjectID), entmsg.ConnectionID(c.ID))
		}
		cs = cs[n:]
		m, err := r.s.read.Message.Query().Where(entmsg.Or(ors...), entmsg.ProviderMessageID(providerID),
			entmsg.DirectionEQ(entmsg.DirectionOutbound)).Select(entmsg.FieldConnectionID).First(r.ctx)
		if ent.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return byID[m.ConnectionID], nil
	}
	return nil, nil
}

// join binds person to c on line (moving a binding to another connection)
// and confirms it to the person.
func (r *lineRouter) join(line, person string, c *ent.Connection) error {
	s := r.s
	key := bindingKey(r.d.Channel, r.d.Provider, line, person)
	changed := false
	bind := func(tx *stream.Tx) error {
		cl, tctx := tx.Client(), tenant.System(tx.Context())
		old, err := cl.Binding.Query().Where(entbinding.ScopeKey(key)).Only(tctx)
		switch {
		case err == nil && old.ConnectionID == c.ID:
			changed = false
			return nil
		case err == nil:
			if err := cl.Binding.DeleteOneID(old.ID).Exec(tctx); err != nil {
				return err
			}
		case !ent.IsNotFound(err):
			return err
		}
		changed = true
		return cl.Binding.Create().SetProjectID(c.ProjectID).SetChannel(r.d.Channel).SetProvider(r.d.Provider).
			SetLine(line).SetPerson(person).SetConnectionID(c.ID).SetScopeKey(key).SetCreatedAt(s.now()).Exec(tctx)
	}
	_, err := s.log.Write(r.ctx, c.ProjectID, bind)
	if err != nil && ent.IsConstraintError(err) {
		// The person's other join, at the same moment: this one wins.
		_, err = s.log.Write(r.ctx, c.ProjectID, bind)
	}
	if err != nil {
		return fmt.Errorf("bind %s on line %s: %w", person, line, err)
	}
	r.bound[key] = c
	name := c.Name
	if name == "" {
		if p, err := s.read.Project.Get(r.ctx, c.ProjectID); err == nil {
			name = p.Name
		}
	}
	if name == "" {
		name = c.ID
	}
	text := fmt.Sprintf("You are now connected to %s. Write your message here.", name)
	if !changed {
		return r.answerOnce(line, person, "joined:"+c.ID, text)
	}
	r.answer(line, person, text)
	return nil
}

// answerOnce answers person on line with text unless they were given an
// answer of that kind in the last AnswerEvery.
func (r *lineRouter) answerOnce(line, person, kind, text string) error {
	ok, err := r.s.claimAnswer(r.ctx, r.d, line, person, kind)
	if err != nil || !ok {
		return err
	}
	r.answer(line, person, text)
	return nil
}

// answer sends text to person from line, outside any connection. A
// failure is logged: the request's messages are still taken.
func (r *lineRouter) answer(line, person, text string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), answerTimeout)
	defer cancel()
	if err := r.d.Shared.Answer(ctx, line, person, text); err != nil {
		r.s.logger.Warn("shared line: answer", "channel", r.d.Channel, "line", line, "err", err)
	}
}

// claimAnswer records that person is answered (kind) on line now, and
// reports whether they may be: false when they were within AnswerEvery.
// Writing prunes entries older than a day and keeps at most
// MaxLineAnswers per line.
func (s *Service) claimAnswer(ctx context.Context, d channels.Descriptor, line, person, kind string) (bool, error) {
	id := hashKey("answer", d.Channel, d.Provider, line, person, kind)
	lineKey := hashKey("line", d.Channel, d.Provider, line)
	now := s.now()
	ok := false
	_, err := s.log.Write(tenant.System(ctx), "line-answer:"+lineKey, func(tx *stream.Tx) error {
		cl, tctx := tx.Client(), tenant.System(tx.Context())
		ok = false
		n, err := cl.LineAnswer.Update().Where(entanswer.ID(id), entanswer.AnsweredAtLT(now.Add(-AnswerEvery))).
			SetAnsweredAt(now).Save(tctx)
		if err != nil || n == 1 {
			ok = err == nil
			return err
		}
		seen, err := cl.LineAnswer.Query().Where(entanswer.ID(id)).Exist(tctx)
		if err != nil || seen {
			return err
		}
		if _, err := cl.LineAnswer.Delete().Where(entanswer.AnsweredAtLT(now.Add(-24 * time.Hour))).Exec(tctx); err != nil {
			return err
		}
		count, err := cl.LineAnswer.Query().Where(entanswer.Line(lineKey)).Count(tctx)
		if err != nil {
			return err
		}
		if over := count - MaxLineAnswers + 1; over > 0 {
			old, err := cl.LineAnswer.Query().Where(entanswer.Line(lineKey)).Order(ent.Asc(entanswer.FieldAnsweredAt)).
				Limit(over).IDs(tctx)
			if err != nil {
				return err
			}
			if _, err := cl.LineAnswer.Delete().Where(entanswer.IDIn(old...)).Exec(tctx); err != nil {
				return err
			}
		}
		if err := cl.LineAnswer.Create().SetID(id).SetLine(lineKey).SetAnsweredAt(now).Exec(tctx); err != nil {
			return err
		}
		ok = true
		return nil
	})
	if err != nil && ent.IsConstraintError(err) {
		return false, nil // answered at the same moment elsewhere
	}
	return ok, err
}

// checkBound refuses a message to a person who has not joined c, when c
// shares its line (a dedicated line writes to anyone).
func (s *Service) checkBound(ctx context.Context, c *ent.Connection, to string) error {
	if !onSharedLine(c) {
		return nil
	}
	ok, err := s.read.Binding.Query().Where(entbinding.ConnectionID(c.ID), entbinding.Person(to)).Exist(ctx)
	if err != nil || ok {
		return err
	}
	if c.JoinLink != nil {
		return Invalid("to", "%s has not joined this connection on %s: share the join link %s", to, c.Address, *c.JoinLink)
	}
	return Invalid("to", "%s has not joined this connection on %s: ask them to send \"join %s\" to %s",
		to, c.Address, *c.JoinCode, c.Address)
}

// BindingView is a person bound to a connection on its shared line, as
// the API shows it.
type BindingView = api.Binding

// Bindings lists the people bound to one of the caller's connections,
// oldest first, after the binding id pg.After. next is the cursor of the
// next page, "" at the end.
func (s *Service) Bindings(ctx context.Context, connID string, pg Page) (out []*BindingView, next string, err error) {
	if _, err := principal(ctx); err != nil {
		return nil, "", err
	}
	if _, err := s.connection(ctx, connID); err != nil {
		return nil, "", err
	}
	if err := pg.validate(ident.Binding); err != nil {
		return nil, "", err
	}
	q := s.read.Binding.Query().Where(entbinding.ConnectionID(connID)).Order(ent.Asc(entbinding.FieldID)).Limit(pg.Limit + 1)
	if pg.After != "" {
		q = q.Where(entbinding.IDGT(pg.After))
	}
	bs, err := q.All(ctx)
	if err != nil {
		return nil, "", err
	}
	if len(bs) > pg.Limit {
		bs = bs[:pg.Limit]
		next = bs[len(bs)-1].ID
	}
	out = make([]*BindingView, len(bs))
	for i, b := range bs {
		out[i] = &BindingView{ID: b.ID, Person: b.Person, CreatedAt: b.CreatedAt.UTC()}
	}
	return out, next, nil
}

// Unbind removes a person's binding to one of the caller's connections:
// their messages on the line reach no connection until they join again.
func (s *Service) Unbind(ctx context.Context, connID, person string) error {
	if _, err := principal(ctx); err != nil {
		return err
	}
	if _, err := s.connection(ctx, connID); err != nil {
		return err
	}
	_, err := s.write(ctx, func(tx *stream.Tx) error {
		n, err := tx.Client().Binding.Delete().Where(entbinding.ConnectionID(connID), entbinding.Person(person)).Exec(tx.Context())
		if err == nil && n == 0 {
			return fault.NotFoundf("%s has not joined connection %s", person, connID)
		}
		return err
	})
	return err
}
