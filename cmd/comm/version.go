package main

import "fmt"

// version is comm's release, the one place it is written: `comm version`
// prints it, `comm serve` says it at start and records it in the database
// it migrates (store.Config.Release: an earlier release then refuses that
// database). It is X.Y.Z or X.Y.Z-pre. A release sets it (say
// "0.4.0"), tags the commit v<version>, adds the upgrade fixtures of that
// commit (gateway/testdata/upgrade/README.md) and sets the next one
// ("0.5.0-dev"). A build may override it with -ldflags "-X main.version=...".
var version = "0.4.0-dev"

func versionCmd(f *flagSet, args []string) error {
	if err := f.parse(args, 0, "no arguments"); err != nil {
		return err
	}
	fmt.Println("comm " + version)
	return nil
}
