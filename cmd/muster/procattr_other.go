//go:build !linux

package main

import "syscall"

// replicaAttr is empty outside Linux (no Pdeathsig): `muster dev --ha`
// stops its replicas when it stops, but a replica outlives a SIGKILLed dev
// process (docs/operations.md, "Platforms").
func replicaAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
