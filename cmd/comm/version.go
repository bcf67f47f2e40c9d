package main

import "fmt"

// version is comm's release, the one place it is written: `comm version`
// prints it and `comm serve` says it at start. A release sets it (say
// "0.4.0"), tags the commit v<version>, and sets the next one ("0.5.0-dev")
// right after; the next release adds this one's upgrade fixtures
// (gateway/testdata/upgrade/README.md). A build may override it with
// -ldflags "-X main.version=...".
var version = "0.4.0-dev"

func versionCmd(f *flagSet, args []string) error {
	if err := f.parse(args, 0, "no arguments"); err != nil {
		return err
	}
	fmt.Println("comm " + version)
	return nil
}
