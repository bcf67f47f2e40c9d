package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// setting is one configuration value: a flag, the environment variable of
// the same meaning, and a default that makes the embedded mode work.
// Precedence: flag, then environment (including .env), then default.
type setting struct {
	flag, env, def, usage string
	value                 *string
}

type settings struct {
	fs   *flag.FlagSet
	list []*setting
}

func newSettings(name, summary string) *settings {
	fs := flag.NewFlagSet("comm "+name, flag.ContinueOnError)
	s := &settings{fs: fs}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: comm %s [flags]\n\n%s\n\nFlags (each also read from its environment variable; a .env file in the working directory counts):\n", name, summary)
		for _, st := range s.list {
			def := st.def
			if def == "" {
				def = `""`
			}
			fmt.Fprintf(fs.Output(), "  --%-22s %s\n      %-22s   env %s, default %s\n", st.flag, st.usage, "", st.env, def)
		}
	}
	return s
}

func (s *settings) add(flagName, env, def, usage string) *string {
	st := &setting{flag: flagName, env: env, def: def, usage: usage, value: new(string)}
	s.fs.StringVar(st.value, flagName, def, usage)
	s.list = append(s.list, st)
	return st.value
}

func (s *settings) parse(args []string) error {
	if err := s.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		return usageError{err}
	}
	if s.fs.NArg() > 0 {
		fmt.Fprintf(s.fs.Output(), "unexpected argument %q\n", s.fs.Arg(0))
		s.fs.Usage()
		return usageError{errors.New("unexpected argument")}
	}
	set := map[string]bool{}
	s.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, st := range s.list {
		if set[st.flag] {
			continue
		}
		if v, ok := os.LookupEnv(st.env); ok {
			*st.value = v
		}
	}
	return nil
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
