// pause: the process that holds a pod sandbox's namespaces open (what the kubelet calls the
// infra or sandbox container). It is PID 1 of the pod: it reaps orphaned children so they never
// pile up as zombies, and exits cleanly on SIGTERM/SIGINT when the sandbox is stopped.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reapChildren()
	}
}

// reapChildren collects every exited child; one SIGCHLD may stand for several exits.
func reapChildren() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
