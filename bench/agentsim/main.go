// Command agentsim serves the agent API for many simulated nodes at once,
// each on its own listener (its own address in 127.0.0.0/8 and a free
// port), for the benchmarks of large fleets (`make bench`,
// docs/performance.md, "Fleets of simulated agents"). It speaks what the
// core's orchestration uses: info, health, the change counter (GET
// /api/v1/changes), the changes feed with its cursor and wait,
// acknowledgements, pushes, look-ups and cancels. A pushed action runs at
// once (one at a time per node, as the agent's runner does) and ends DONE
// after -delay (muster.io/debug.sleep after its seconds,
// muster.io/debug.fail FAILED). Nothing is stored: every start is a new
// agent database (a new store id) and a new change-counter epoch.
//
// It prints "node address" for every node, then "ready", and then answers
// the lines of its standard input: "mark" starts a window (its reply is
// "ok"), "stats" replies with one JSON line of the window so far (Stats).
// It stops when its input ends.
//
// A test (e2e, TestAgentSimAnswersAsAgent) sends the same requests to it
// and to a real muster-agent and compares the shapes of the answers.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "agentsim:", err)
		os.Exit(1)
	}
}

// fdsPerNode is what a node costs this process in descriptors: its
// listener and the core's connection to it, and one more for a request of
// the API or a run watch beside a sync.
const fdsPerNode = 3

func run(ctx context.Context, args []string, in io.Reader, out io.Writer) error {
	fs := flag.NewFlagSet("agentsim", flag.ContinueOnError)
	cluster := fs.String("cluster", "bench", "the cluster every node is in")
	prefix := fs.String("prefix", "node-", "node ids are this and a number")
	first := fs.Int("first", 1, "the number of the first node")
	count := fs.Int("count", 1000, "how many nodes")
	ipFlag := fs.String("ip", "127.1.0.1", "the first node's address; the next ones follow it")
	delay := fs.Duration("delay", time.Second, "how long a pushed action runs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ip := net.ParseIP(*ipFlag)
	if ip == nil || ip.To4() == nil || !ip.IsLoopback() {
		return fmt.Errorf("-ip %q: want an IPv4 address in 127.0.0.0/8", *ipFlag)
	}
	if last := ip.To4(); *count < 1 || int(last[1])<<16|int(last[2])<<8|int(last[3])+*count > 1<<24 {
		return fmt.Errorf("-count %d: want at least 1, and every node inside 127.0.0.0/8", *count)
	}
	if err := RaiseNoFile(uint64(*count*fdsPerNode + 1000)); err != nil {
		return err
	}
	f, err := NewFleet(*cluster, *prefix, *first, *count, ip, *delay)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(out)
	ids, addrs := f.Nodes()
	for i := range ids {
		fmt.Fprintf(w, "%s %s\n", ids[i], addrs[i])
	}
	fmt.Fprintln(w, "ready")
	if err := w.Flush(); err != nil {
		return err
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case line, ok := <-lines:
			if !ok {
				return nil // the input ended: stop
			}
			var reply []byte
			switch line {
			case "mark":
				f.Mark()
				reply = []byte("ok")
			case "stats":
				if reply, err = json.Marshal(f.Stats()); err != nil {
					return err
				}
			default:
				reply = []byte(fmt.Sprintf("error: unknown request %q", line))
			}
			if _, err := fmt.Fprintf(out, "%s\n", reply); err != nil {
				return err
			}
		}
	}
}

// RaiseNoFile raises this process's RLIMIT_NOFILE to at least want
// descriptors: the soft limit up to the hard one, and the hard one too
// when the process may (root, or CAP_SYS_RESOURCE); an error says what
// is missing.
func RaiseNoFile(want uint64) error {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return err
	}
	if rl.Cur >= want {
		return nil
	}
	if want <= rl.Max {
		rl.Cur = want
	} else {
		rl.Cur, rl.Max = want, want
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return errors.Join(fmt.Errorf("RLIMIT_NOFILE of %d descriptors (ulimit -Hn, LimitNOFILE): use fewer nodes per process", want), err)
	}
	return nil
}
