package channels

import (
	"fmt"
	"slices"
	"strings"
)

// Registry is the set of channels a gateway knows. It is a value built in
// main, never a package global.
type Registry struct {
	list []Descriptor
}

// NewRegistry returns a registry of ds. Later descriptors replace earlier
// ones with the same channel and provider, so main can start from Known()
// and add the adapters it has.
func NewRegistry(ds ...Descriptor) *Registry {
	r := &Registry{}
	for _, d := range ds {
		r.Add(d)
	}
	return r
}

// Add registers d, replacing a descriptor of the same channel and provider.
func (r *Registry) Add(d Descriptor) {
	for i, e := range r.list {
		if e.Channel == d.Channel && e.Provider == d.Provider {
			r.list[i] = d
			return
		}
	}
	r.list = append(r.list, d)
}

// Known returns every channel of the spec's table with its tier, without
// adapters; main adds the adapters that exist.
func Known() []Descriptor {
	return []Descriptor{
		{Channel: "email", Tier: Free},
		{Channel: "telegram", Tier: Free},
		{Channel: "discord", Tier: Free},
		{Channel: "slack", Tier: Free},
		{Channel: "instagram", Tier: Free},
		{Channel: "facebook", Tier: Free},
		{Channel: "sms", Provider: "twilio", Tier: Free},
		{Channel: "sms", Provider: "telnyx", Tier: Free},
		{Channel: "whatsapp", Provider: "twilio", Tier: Free},
		{Channel: "whatsapp", Provider: "hosted", Tier: Paid},
		{Channel: "x", Tier: Paid},
		{Channel: "imessage", Tier: Paid},
	}
}

// UnknownError reports a channel or provider the registry does not know.
type UnknownError struct {
	Param string // "channel" or "provider"
	Msg   string
}

func (e *UnknownError) Error() string { return e.Msg }

// Lookup finds the descriptor of channel and provider. An empty provider
// selects the channel's only provider.
func (r *Registry) Lookup(channel, provider string) (Descriptor, error) {
	var candidates []Descriptor
	for _, d := range r.list {
		if d.Channel == channel {
			candidates = append(candidates, d)
		}
	}
	if len(candidates) == 0 {
		known := r.Channels()
		if len(known) == 0 {
			return Descriptor{}, &UnknownError{Param: "channel",
				Msg: fmt.Sprintf("unknown channel %q; no channels are configured", channel)}
		}
		return Descriptor{}, &UnknownError{Param: "channel",
			Msg: fmt.Sprintf("unknown channel %q; known channels: %s", channel, strings.Join(known, ", "))}
	}
	if provider == "" && len(candidates) == 1 {
		return candidates[0], nil
	}
	names := make([]string, 0, len(candidates))
	for _, d := range candidates {
		if d.Provider == provider {
			return d, nil
		}
		names = append(names, d.Provider)
	}
	if provider == "" {
		return Descriptor{}, &UnknownError{Param: "provider",
			Msg: fmt.Sprintf("channel %q has several providers; choose one of: %s", channel, strings.Join(names, ", "))}
	}
	if len(names) == 1 && names[0] == "" {
		return Descriptor{}, &UnknownError{Param: "provider",
			Msg: fmt.Sprintf("channel %q has no provider choice; leave provider out", channel)}
	}
	return Descriptor{}, &UnknownError{Param: "provider",
		Msg: fmt.Sprintf("unknown provider %q for channel %q; known: %s", provider, channel, strings.Join(names, ", "))}
}

// Channels lists the channel names, sorted.
func (r *Registry) Channels() []string {
	var out []string
	for _, d := range r.list {
		if !slices.Contains(out, d.Channel) {
			out = append(out, d.Channel)
		}
	}
	slices.Sort(out)
	return out
}

// Descriptors returns the registered descriptors, in the order they were
// added.
func (r *Registry) Descriptors() []Descriptor {
	return append([]Descriptor(nil), r.list...)
}
