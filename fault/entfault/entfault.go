// Package entfault presents ent's own errors as faults, for the front
// doors' one presenter (fault.Present): an unknown row is not_found, a
// schema validator's refusal is invalid_parameter.
package entfault

import (
	"errors"

	"github.com/comm-gateway/comm/ent"
	"github.com/comm-gateway/comm/fault"
)

// Of returns err as a *fault.Error when it is one of ent's errors a caller
// can act on, and err itself otherwise (a *fault.Error in its chain wins).
func Of(err error) error {
	var (
		e       *fault.Error
		invalid *ent.ValidationError
	)
	switch {
	case err == nil, errors.As(err, &e):
		return err
	case ent.IsNotFound(err):
		return fault.NotFoundf("not found")
	case errors.As(err, &invalid):
		// A schema validator refused a value the domain let through: the
		// caller's input is at fault, not the server. The validator's own
		// words, without ent's type names.
		return fault.Invalid(invalid.Name, "%v", innermost(invalid))
	}
	return err
}

// innermost returns the error at the end of err's wrap chain.
func innermost(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
