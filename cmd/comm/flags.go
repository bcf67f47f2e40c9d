package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// flagSet is the flags of one subcommand; every subcommand, client or
// server, declares its flags on one. A flag has a name, a default and a
// usage line, and may name an environment variable that counts when the
// flag is not given (main loads a .env file in the working directory into
// the environment first, without overriding it). Precedence: the flag,
// then the environment, then .env, then the default.
type flagSet struct {
	fs         *flag.FlagSet
	cmd        *command
	envs       []flagEnv // in declaration order: the order of --help
	json       *bool     // --json, on the client commands (after parse)
	positional []string  // the arguments that are not flags (after parse)
}

// flagEnv is a flag and its environment variable ("" for none), with the
// other names the variable goes by (aliases, in the order they count).
type flagEnv struct {
	name, env string
	aliases   []string
}

func newFlagSet(c *command) *flagSet {
	f := &flagSet{fs: flag.NewFlagSet("comm "+c.name, flag.ContinueOnError), cmd: c}
	f.fs.Usage = func() { f.printUsage(f.fs.Output()) }
	return f
}

func (f *flagSet) declared(name, env string) { f.envs = append(f.envs, flagEnv{name: name, env: env}) }

// EnvAlias lets the environment variable alias set flag name, declared
// before, as its own variable does: the flag's variable counts first, the
// alias when it is not set, and both set to different values is an error
// naming both.
func (f *flagSet) EnvAlias(name, alias string) {
	for i := range f.envs {
		if f.envs[i].name == name {
			f.envs[i].aliases = append(f.envs[i].aliases, alias)
			return
		}
	}
	panic("comm: EnvAlias of an undeclared flag --" + name)
}

// lookupEnv returns the value of fe's environment variable, or of the
// first alias set, and which variable it came from.
func (fe flagEnv) lookupEnv() (value, from string, ok bool, err error) {
	if fe.env != "" {
		value, ok = os.LookupEnv(fe.env)
		from = fe.env
	}
	for _, a := range fe.aliases {
		v, set := os.LookupEnv(a)
		switch {
		case !set:
		case !ok:
			value, from, ok = v, a, true
		case v != value:
			return "", "", false, fmt.Errorf("%s and %s both set --%s, to different values; set one", from, a, fe.name)
		}
	}
	return value, from, ok, nil
}

// String declares a text flag. The serve and bench settings are all text,
// parsed after parse (parseInt, parseBool, parseDuration), so that a bad
// value from any source is refused naming the flag.
func (f *flagSet) String(name, env, def, usage string) *string {
	f.declared(name, env)
	return f.fs.String(name, def, usage)
}

// Bool declares a switch: --name alone sets it.
func (f *flagSet) Bool(name, env string, def bool, usage string) *bool {
	f.declared(name, env)
	return f.fs.Bool(name, def, usage)
}

func (f *flagSet) Int(name, env string, def int, usage string) *int {
	f.declared(name, env)
	return f.fs.Int(name, def, usage)
}

func (f *flagSet) Int64(name, env string, def int64, usage string) *int64 {
	f.declared(name, env)
	return f.fs.Int64(name, def, usage)
}

func (f *flagSet) Duration(name, env string, def time.Duration, usage string) *time.Duration {
	f.declared(name, env)
	return f.fs.Duration(name, def, usage)
}

// parse reads args: flags may come before, between and after the
// positional arguments, which end up in f.positional. nargs is how many
// positional arguments the command takes (-1: any number); what names
// them in the error ("no arguments", "one channel"). The flags not given
// then take their environment variable's value where it is set. --help
// returns flag.ErrHelp (main exits 0); any other mistake a cliError with
// exitUsage, the flag package having printed the usage.
func (f *flagSet) parse(args []string, nargs int, what string) error {
	if f.cmd.json {
		f.json = f.Bool("json", "", false, "print JSON instead of text")
	}
	var pos []string
	for {
		if err := f.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return cliError{exitUsage, err}
		}
		if f.fs.NArg() == 0 {
			break
		}
		pos = append(pos, f.fs.Arg(0))
		args = f.fs.Args()[1:]
	}
	if nargs >= 0 && len(pos) != nargs {
		f.fs.Usage()
		if nargs < len(pos) {
			return cliError{exitUsage, fmt.Errorf("want %s, not %q", what, pos[nargs])}
		}
		return cliError{exitUsage, fmt.Errorf("want %s", what)}
	}
	f.positional = pos
	given := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	for _, fe := range f.envs {
		if (fe.env == "" && len(fe.aliases) == 0) || given[fe.name] {
			continue
		}
		v, from, ok, err := fe.lookupEnv()
		if err != nil {
			return cliError{exitUsage, err}
		}
		if ok {
			if err := f.fs.Set(fe.name, v); err != nil {
				return cliError{exitUsage, fmt.Errorf("%s (for --%s): %w", from, fe.name, err)}
			}
		}
	}
	return nil
}

// printUsage is --help: the command's usage line, what it does, and its
// flags in declaration order, each with its environment variable and
// default.
func (f *flagSet) printUsage(w io.Writer) {
	c := f.cmd
	line := c.usage
	if !strings.Contains(line, "[flags]") {
		line += " [flags]"
	}
	fmt.Fprintf(w, "Usage: comm %s\n\n%s\n", line, c.about)
	if len(f.envs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nFlags:")
	withEnv := false
	for _, fe := range f.envs {
		fl := f.fs.Lookup(fe.name)
		typ, usage := flag.UnquoteUsage(fl)
		if typ != "" {
			typ = " " + typ
		}
		fmt.Fprintf(w, "  --%s%s\n", fl.Name, typ)
		wrap(w, "      ", usage, 80)
		def := fl.DefValue
		if def == "" {
			def = `""`
		}
		switch {
		case fe.env != "":
			withEnv = true
			env := fe.env
			for _, a := range fe.aliases {
				env += " (or " + a + ")"
			}
			fmt.Fprintf(w, "      env %s, default %s\n", env, def)
		case !isZeroDefault(fl.DefValue):
			fmt.Fprintf(w, "      default %s\n", def)
		}
	}
	if withEnv {
		fmt.Fprintln(w, "\nA flag that is not given takes the value of its environment variable, when\nthat is set; a .env file in the working directory counts as environment.")
	}
}

func isZeroDefault(v string) bool {
	switch v {
	case "", "0", "false", "0s":
		return true
	}
	return false
}

// wrap writes text in lines of at most width bytes (a longer word stands
// alone), each after indent.
func wrap(w io.Writer, indent, text string, width int) {
	for _, para := range strings.Split(text, "\n") {
		line := indent
		for _, word := range strings.Fields(para) {
			if len(line) > len(indent) && len(line)+1+len(word) > width {
				fmt.Fprintln(w, line)
				line = indent
			}
			if len(line) > len(indent) {
				line += " "
			}
			line += word
		}
		fmt.Fprintln(w, line)
	}
}

func parseInt(name, v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s must be a non-negative integer, not %q", name, v)
	}
	return n, nil
}

func parseDuration(name, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s must be a duration such as 30s, not %q", name, v)
	}
	return d, nil
}

func parseBool(name, v string) (bool, error) {
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return false, fmt.Errorf("%s must be true or false, not %q", name, v)
	}
	return b, nil
}

// parseRetention reads --event-retention (COMM_EVENT_RETENTION): "off"
// (or empty, or 0) keeps every event; otherwise a duration of at least a
// minute, in Go's units plus d for days ("90d", "36h", "1d12h").
func parseRetention(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	switch strings.ToLower(v) {
	case "", "off", "0":
		return 0, nil
	}
	bad := fmt.Errorf("--event-retention (COMM_EVENT_RETENTION) must be off or a duration of at least 1m such as 90d, 36h or 1d12h (d: days), not %q", v)
	var d time.Duration
	rest := v
	if i := strings.IndexByte(v, 'd'); i >= 0 {
		days, err := strconv.Atoi(v[:i])
		if err != nil || days < 0 || days > 100*365 {
			return 0, bad
		}
		d, rest = time.Duration(days)*24*time.Hour, v[i+1:]
	}
	if rest != "" {
		more, err := time.ParseDuration(rest)
		if err != nil || more < 0 {
			return 0, bad
		}
		d += more
	}
	if d < time.Minute {
		return 0, bad
	}
	return d, nil
}
