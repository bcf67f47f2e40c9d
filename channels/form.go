package channels

import "strings"

// Field is one key of a channel's connection configuration (the "config"
// object of POST /v1/connections) that the caller sets, as a connect form
// shows it. Keys an adapter sets itself (a webhook secret Provision makes
// up, what an install fills in) are not fields.
type Field struct {
	// Name is the configuration key: "bot_token".
	Name string
	// Label names the field for a person: "Bot token".
	Label string
	// Help says in one sentence what the value is and where to find it.
	Help string
	// Secret marks a credential (a token, a password): a form takes it in
	// a password input, and the gateway never shows it back.
	Secret bool
	// Required says that a configuration given by hand must have it (an
	// install of the operator's app, on a channel with OAuth, needs none).
	Required bool
	// Kind is the value's type, one of the Kind constants.
	Kind string
	// Example is a value of the right form, for a placeholder.
	Example string
}

// Kinds of Field values. A bool is a JSON true or false; the others are
// JSON strings.
const (
	KindString = "string"
	KindBool   = "bool"
	KindURL    = "url"
	KindEmail  = "email"
	KindPhone  = "phone"
)

// FieldNames lists the fields' names, as "a, b, c", for messages naming
// the keys a configuration takes (DecodeConfig's known).
func FieldNames(fs []Field) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}
