package channels_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/comm-gateway/comm/channels"
)

// spec is the spec's table of channels: who may connect what.
var spec = []struct {
	channel, provider string
	tier              channels.Tier
}{
	{"email", "", channels.Free},
	{"telegram", "", channels.Free},
	{"discord", "", channels.Free},
	{"slack", "", channels.Free},
	{"instagram", "", channels.Free},
	{"facebook", "", channels.Free},
	{"sms", "twilio", channels.Free},
	{"sms", "telnyx", channels.Free},
	{"whatsapp", "twilio", channels.Free},
	{"whatsapp", "hosted", channels.Paid},
	{"x", "", channels.Paid},
	{"imessage", "", channels.Paid},
}

func TestKnown(t *testing.T) {
	t.Parallel()
	known := channels.Known()
	if len(known) != len(spec) {
		t.Errorf("Known() has %d descriptors, the spec %d", len(known), len(spec))
	}
	for _, want := range spec {
		n := 0
		for _, d := range known {
			if d.Channel == want.channel && d.Provider == want.provider {
				n++
				if d.Tier != want.tier {
					t.Errorf("%s/%s: tier %q, want %q", want.channel, want.provider, d.Tier, want.tier)
				}
				if d.New != nil {
					t.Errorf("%s/%s: Known() has a constructor; main adds the adapters", want.channel, want.provider)
				}
			}
		}
		if n != 1 {
			t.Errorf("%s/%s: %d descriptors in Known(), want 1", want.channel, want.provider, n)
		}
	}
	// Known returns a fresh slice: a caller changing it changes nothing.
	known[0].Tier = "changed"
	if channels.Known()[0].Tier == "changed" {
		t.Error("Known() returns shared state")
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	r := channels.NewRegistry(channels.Known()...)
	found := []struct{ channel, provider string }{
		{"email", ""},
		{"x", ""},
		{"sms", "twilio"},
		{"sms", "telnyx"},
		{"whatsapp", "twilio"},
		{"whatsapp", "hosted"},
	}
	for _, tt := range found {
		d, err := r.Lookup(tt.channel, tt.provider)
		if err != nil {
			t.Errorf("Lookup(%q, %q): %v", tt.channel, tt.provider, err)
			continue
		}
		if d.Channel != tt.channel || d.Provider != tt.provider {
			t.Errorf("Lookup(%q, %q) = %s/%s", tt.channel, tt.provider, d.Channel, d.Provider)
		}
	}

	allChannels := []string{"discord", "email", "facebook", "imessage", "instagram", "slack", "sms", "telegram", "whatsapp", "x"}
	unknown := []struct {
		name, channel, provider string
		param                   string
		contains                []string
	}{
		{"unknown channel", "pigeon", "", "channel", []string{`"pigeon"`, "known channels: " + strings.Join(allChannels, ", ")}},
		{"unknown channel with provider", "pigeon", "twilio", "channel", []string{`"pigeon"`}},
		{"empty channel", "", "", "channel", []string{"known channels"}},
		{"channel names are exact", "Email", "", "channel", []string{`"Email"`}},
		{"several providers, none chosen", "sms", "", "provider", []string{`"sms"`, "choose one of: twilio, telnyx"}},
		{"several providers, none chosen (whatsapp)", "whatsapp", "", "provider", []string{"twilio, hosted"}},
		{"unknown provider", "sms", "vonage", "provider", []string{`"vonage"`, `"sms"`, "twilio, telnyx"}},
		{"provider of another channel", "whatsapp", "telnyx", "provider", []string{`"telnyx"`, "twilio, hosted"}},
		{"single-provider channel given a provider", "email", "sendgrid", "provider", []string{`"email"`, "leave provider out"}},
	}
	for _, tt := range unknown {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := r.Lookup(tt.channel, tt.provider)
			var ue *channels.UnknownError
			if !errors.As(err, &ue) {
				t.Fatalf("Lookup(%q, %q) = %+v, %v; want an *UnknownError", tt.channel, tt.provider, d, err)
			}
			if ue.Param != tt.param {
				t.Errorf("Param = %q, want %q", ue.Param, tt.param)
			}
			for _, s := range tt.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestLookupEmptyRegistry(t *testing.T) {
	t.Parallel()
	_, err := channels.NewRegistry().Lookup("email", "")
	var ue *channels.UnknownError
	if !errors.As(err, &ue) || ue.Param != "channel" {
		t.Fatalf("Lookup on an empty registry: %v", err)
	}
	if strings.HasSuffix(strings.TrimSpace(err.Error()), ":") {
		t.Errorf("error %q ends in an empty list", err)
	}
}

func TestAdd(t *testing.T) {
	t.Parallel()
	newAdapter := func(context.Context, channels.Connection) (channels.Adapter, error) { return nil, nil }
	r := channels.NewRegistry(channels.Known()...)
	before := r.Channels()

	// main adds the adapters it has over the spec's table.
	r.Add(channels.Descriptor{Channel: "email", Tier: channels.Free, New: newAdapter})
	r.Add(channels.Descriptor{Channel: "sms", Provider: "telnyx", Tier: channels.Paid, New: newAdapter})
	if d, err := r.Lookup("email", ""); err != nil || d.New == nil {
		t.Errorf("email after Add: %+v, %v; want the added descriptor", d, err)
	}
	if d, err := r.Lookup("sms", "telnyx"); err != nil || d.New == nil || d.Tier != channels.Paid {
		t.Errorf("sms/telnyx after Add: %+v, %v; want the added descriptor", d, err)
	}
	if d, err := r.Lookup("sms", "twilio"); err != nil || d.New != nil {
		t.Errorf("sms/twilio after adding telnyx: %+v, %v; want it untouched", d, err)
	}
	if _, err := r.Lookup("sms", ""); err == nil {
		t.Error("sms still has two providers; Lookup without one must ask to choose")
	}
	if got := r.Channels(); !slices.Equal(got, before) {
		t.Errorf("replacing descriptors changed Channels() from %v to %v", before, got)
	}

	r.Add(channels.Descriptor{Channel: "test", Tier: channels.Free, New: newAdapter})
	if d, err := r.Lookup("test", ""); err != nil || d.Channel != "test" {
		t.Errorf("test after Add: %+v, %v", d, err)
	}
}

func TestNewRegistryLaterWins(t *testing.T) {
	t.Parallel()
	r := channels.NewRegistry(
		channels.Descriptor{Channel: "email", Tier: channels.Free},
		channels.Descriptor{Channel: "email", Tier: channels.Paid},
	)
	if d, err := r.Lookup("email", ""); err != nil || d.Tier != channels.Paid {
		t.Errorf("Lookup = %+v, %v; want the later descriptor", d, err)
	}
}

func TestChannels(t *testing.T) {
	t.Parallel()
	want := []string{"discord", "email", "facebook", "imessage", "instagram", "slack", "sms", "telegram", "whatsapp", "x"}
	if got := channels.NewRegistry(channels.Known()...).Channels(); !slices.Equal(got, want) {
		t.Errorf("Channels() = %v, want %v", got, want)
	}
	r := channels.NewRegistry(
		channels.Descriptor{Channel: "zeta"},
		channels.Descriptor{Channel: "alpha", Provider: "b"},
		channels.Descriptor{Channel: "alpha", Provider: "a"},
		channels.Descriptor{Channel: "mid"},
	)
	if got := r.Channels(); !slices.Equal(got, []string{"alpha", "mid", "zeta"}) {
		t.Errorf("Channels() = %v, want sorted and unique", got)
	}
	if got := channels.NewRegistry().Channels(); len(got) != 0 {
		t.Errorf("Channels() of an empty registry = %v", got)
	}
}
