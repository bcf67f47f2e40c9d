package channeltest

import (
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/comm-gateway/comm/channels"
)

var fieldNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// Form checks a descriptor's connect form against its adapter, so that the
// form cannot drift from the code: config is the adapter's configuration
// struct (a value of it), conn the connection New is given (its Config is
// replaced; set Line for a channel of shared lines).
//
// Every field is described (label, help, a known kind, an example) and
// names a JSON key of config. Where New is set: a configuration of every
// field's example is accepted; leaving out a required field is refused
// (a *channels.ConfigError names it); and an empty configuration starts
// an install (channels.Installer.NeedsInstall) exactly when the
// descriptor says OAuth.
func Form(t *testing.T, d channels.Descriptor, config any, conn channels.Connection) {
	t.Helper()
	if d.Summary == "" || strings.ContainsAny(d.Summary, "\r\n") {
		t.Errorf("%s: Summary = %q, want one line", label(d), d.Summary)
	}
	keys := jsonKeys(t, config)
	full := map[string]any{}
	for _, f := range d.Fields {
		switch {
		case !fieldNameRE.MatchString(f.Name):
			t.Errorf("%s: field name %q, want a JSON key like bot_token", label(d), f.Name)
		case full[f.Name] != nil:
			t.Errorf("%s: field %q is declared twice", label(d), f.Name)
		case !keys[f.Name]:
			t.Errorf("%s: field %q is no key of %T (keys: %s)", label(d), f.Name, config, strings.Join(slices.Sorted(maps.Keys(keys)), ", "))
		}
		if f.Label == "" || f.Help == "" || f.Example == "" {
			t.Errorf("%s: field %q needs a label, help and an example: %+v", label(d), f.Name, f)
		}
		switch f.Kind {
		case channels.KindBool:
			if f.Example != "true" && f.Example != "false" {
				t.Errorf("%s: bool field %q has the example %q, want true or false", label(d), f.Name, f.Example)
			}
			full[f.Name] = f.Example == "true"
		case channels.KindString, channels.KindURL, channels.KindEmail, channels.KindPhone:
			full[f.Name] = f.Example
		default:
			t.Errorf("%s: field %q has the unknown kind %q", label(d), f.Name, f.Kind)
		}
	}
	if d.New == nil {
		if d.Settings == "" {
			t.Errorf("%s: New is nil and Settings does not say what the operator sets", label(d))
		}
		return
	}

	build := func(cfg map[string]any) (channels.Adapter, error) {
		t.Helper()
		raw, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c := conn
		c.Config = raw
		a, err := call(t, "New", func() (channels.Adapter, error) { return d.New(t.Context(), c) })
		if err == nil {
			t.Cleanup(func() {
				if cl, ok := a.(channels.Closer); ok {
					_ = cl.Close()
				}
			})
		}
		return a, err
	}
	if len(d.Fields) > 0 {
		if _, err := build(full); err != nil {
			t.Errorf("%s: New refused the form's examples %v: %v", label(d), full, err)
		}
	}
	for _, f := range d.Fields {
		if !f.Required {
			continue
		}
		without := maps.Clone(full)
		delete(without, f.Name)
		if len(without) == 0 && d.OAuth {
			continue // {} installs the operator's app
		}
		_, err := build(without)
		var ce *channels.ConfigError
		switch {
		case err == nil:
			t.Errorf("%s: field %q is required, but New accepted %v", label(d), f.Name, without)
		case errors.As(err, &ce) && ce.Field != f.Name:
			t.Errorf("%s: without the required field %q, New's error names %q: %v", label(d), f.Name, ce.Field, err)
		}
	}
	a, err := build(map[string]any{})
	inst, ok := a.(channels.Installer)
	installs := err == nil && ok && inst.NeedsInstall()
	if installs != d.OAuth {
		t.Errorf("%s: OAuth = %v, but New({}) = %T, %v (an install: %v)", label(d), d.OAuth, a, err, installs)
	}
}

// jsonKeys returns the JSON keys of v's struct type.
func jsonKeys(t *testing.T, v any) map[string]bool {
	t.Helper()
	typ := reflect.TypeOf(v)
	for typ != nil && typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ == nil || typ.Kind() != reflect.Struct {
		t.Fatalf("channeltest.Form: config is %T, want the adapter's configuration struct", v)
	}
	keys := map[string]bool{}
	for f := range typ.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		keys[name] = true
	}
	return keys
}

func label(d channels.Descriptor) string {
	if d.Provider == "" {
		return d.Channel
	}
	return d.Channel + " (" + d.Provider + ")"
}
