package messaging

import (
	"errors"
	"sync/atomic"

	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/ent"
	"github.com/comm-gateway/comm/fault"
	"github.com/comm-gateway/comm/stream"
)

// Billing charges the messages of paid channels to the account owning the
// project, in the transaction that records them: a message is never
// stored without its charge, nor charged without being stored. The
// accounts feature implements it (the core knows no prices or ledgers);
// without one, nothing is charged.
type Billing interface {
	// Charge debits the price of a message. A balance that does not cover
	// it is an error matching fault.ErrInsufficientCredit, with nothing
	// debited: an outbound message is then refused (402), an inbound one
	// stored unbilled. A message priced at zero costs nothing and leaves no
	// entry.
	Charge(tx *stream.Tx, c Charge) error
	// Refund credits back the debit of a message that failed (once; none
	// when it was not charged).
	Refund(tx *stream.Tx, c Charge) error
}

// Charge names a message to charge or refund.
type Charge struct {
	ProjectID string
	// Channel and Provider price the message ("whatsapp", "hosted").
	Channel, Provider string
	// Direction is ChargeIn or ChargeOut.
	Direction string
	// MessageID keys the ledger entry: a message is charged once.
	MessageID string
}

// Charge directions.
const (
	ChargeIn  = "in"
	ChargeOut = "out"
)

// billingBox holds the Billing, set once the accounts feature is built
// (after the service it is built on).
type billingBox struct{ v atomic.Pointer[Billing] }

// SetBilling makes b charge paid messages from now on.
func (s *Service) SetBilling(b Billing) { s.billing.v.Store(&b) }

// charge returns the Billing and the charge of a message on c when c's
// channel is a paid one and a Billing is set; nil otherwise.
func (s *Service) charge(c *ent.Connection, direction, msgID string) (Billing, *Charge) {
	b := s.billing.v.Load()
	if b == nil || *b == nil {
		return nil, nil
	}
	d, err := s.channels.Lookup(c.Channel, c.Provider)
	if err != nil || d.Tier != channels.Paid {
		return nil, nil
	}
	return *b, &Charge{ProjectID: c.ProjectID, Channel: c.Channel, Provider: c.Provider, Direction: direction, MessageID: msgID}
}

// chargeInbound charges an inbound message; false when the credit did not
// cover it (the message is stored all the same, marked unbilled).
func (s *Service) chargeInbound(tx *stream.Tx, c *ent.Connection, msgID string) (billed bool, err error) {
	b, ch := s.charge(c, ChargeIn, msgID)
	if b == nil {
		return true, nil
	}
	err = b.Charge(tx, *ch)
	if errors.Is(err, fault.ErrInsufficientCredit) {
		return false, nil
	}
	return err == nil, err
}

// refund credits back an outbound message that failed.
func (s *Service) refund(tx *stream.Tx, c *ent.Connection, msgID string) error {
	if c == nil {
		return nil
	}
	b, ch := s.charge(c, ChargeOut, msgID)
	if b == nil {
		return nil
	}
	return b.Refund(tx, *ch)
}
