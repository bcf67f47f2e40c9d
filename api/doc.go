// Package api declares the JSON shapes of the REST API once, for both
// sides of the wire: the gateway encodes its answers with these types
// (package messaging and the email host alias them) and the Go client
// decodes them into the same types (package client aliases them). A field
// added here is therefore served and read at once; it cannot be added on
// one side and silently miss the other.
//
// The types are plain data: json tags, doc comments, no behaviour beyond
// decoding helpers. The package imports only the standard library.
package api
