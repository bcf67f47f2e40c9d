package main

import (
	"github.com/comm-gateway/comm/channels"
	"github.com/comm-gateway/comm/channels/email"
	"github.com/comm-gateway/comm/channels/testchan"
	"github.com/comm-gateway/comm/messaging"
	"github.com/comm-gateway/comm/stream"
)

// registry is every channel comm knows, with the adapters built so far.
func registry(mail *email.Channel) *channels.Registry {
	r := channels.NewRegistry(channels.Known()...)
	r.Add(testchan.Descriptor())
	r.Add(mail.Descriptor())
	return r
}

// newService builds the messaging service with every channel: the email
// channel is bound to the service, which it asks for domain keys and
// delivery between inboxes.
func newService(l *stream.Log, opts messaging.Options, mail email.Options) (*messaging.Service, error) {
	ch := email.New(mail)
	opts.Channels = registry(ch)
	opts.Mail.Domain = ch.MailDomain()
	svc, err := messaging.New(l, opts)
	if err != nil {
		return nil, err
	}
	ch.Bind(svc)
	return svc, nil
}
