package api

// ChannelInfo is a channel the gateway has (GET /v1/channels): who may
// connect it, whether the caller can now, and the form that connects it
// (the "config" of POST /v1/connections).
type ChannelInfo struct {
	// Channel is the channel's name, as POST /v1/connections takes it.
	Channel string `json:"channel"`
	// Provider names the provider where a channel has several ("twilio",
	// "telnyx", "hosted"); null where it has one.
	Provider *string `json:"provider"`
	// Tier is "free" (any key) or "paid" (a signed-in key).
	Tier string `json:"tier"`
	// Available says the gateway would connect the channel for this key
	// now; Reason says why not otherwise (the 402 or 501 that connecting
	// answers), and is null when it would.
	Available bool    `json:"available"`
	Reason    *string `json:"reason"`
	// OAuth says that connecting with an empty config starts an install
	// of the operator's app: the connection comes back pending with its
	// authorize_url. Fields, if any, are the other way in.
	OAuth bool `json:"oauth"`
	// Summary says in one line what the channel is and what connecting it
	// takes.
	Summary string `json:"summary"`
	// Fields are the config keys the caller sets, in the form's order;
	// empty when the channel takes no config.
	Fields []ChannelField `json:"fields"`
}

// ChannelField is one key of a channel's config, as a connect form shows
// it.
type ChannelField struct {
	// Name is the config key: "bot_token".
	Name string `json:"name"`
	// Label names the field for a person: "Bot token".
	Label string `json:"label"`
	// Help says in one sentence what the value is and where to find it.
	Help string `json:"help"`
	// Secret marks a credential: take it in a password input; the gateway
	// never shows it back.
	Secret bool `json:"secret"`
	// Required: a config given by hand must have it (an OAuth install
	// needs none).
	Required bool `json:"required"`
	// Kind is the value's type: string, bool (a JSON true or false), url,
	// email or phone (the others are JSON strings).
	Kind string `json:"kind"`
	// Example is a value of the right form, for a placeholder.
	Example string `json:"example"`
}
