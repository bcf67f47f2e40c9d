//go:build !race

package inbound

const raceEnabled = false
