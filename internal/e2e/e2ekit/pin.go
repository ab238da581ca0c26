package e2ekit

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ParseCPUs parses a list of CPUs as taskset and the kernel write them:
// "1", "0,2", "2-3,5". The empty list is nil.
func ParseCPUs(list string) ([]int, error) {
	var cpus []int
	for part := range strings.SplitSeq(list, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a {
			return nil, fmt.Errorf("cpu list %q: %q is not a CPU or a range of CPUs", list, part)
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// PinDatabase gives the database server pid cores of its own, as an RDS
// instance has its vCPUs to itself: every thread of pid runs on cpus, and
// this process, with every process it starts afterwards (the emulators,
// the load generator's connections are in-process), on the other CPUs it
// may use. The server's later threads (one per connection) inherit the
// mask from the thread that makes them. Other processes on the machine are
// not moved: the reservation holds against this run's own load, which is
// what the CPU figure must not carry. The returned function gives the
// server and this process their former affinities back (the processes
// started meanwhile keep theirs).
func PinDatabase(pid int, cpus []int) (restore func(), err error) {
	var self unix.CPUSet
	if err := unix.SchedGetaffinity(0, &self); err != nil {
		return nil, fmt.Errorf("read this process's CPU affinity: %w", err)
	}
	var db, rest unix.CPUSet
	for _, c := range cpus {
		if c >= 1024 {
			return nil, fmt.Errorf("pin the database to CPU %d: not a CPU", c)
		}
		db.Set(c)
	}
	for c := range 1024 {
		if self.IsSet(c) && !db.IsSet(c) {
			rest.Set(c)
		}
	}
	if db.Count() == 0 || rest.Count() == 0 {
		return nil, fmt.Errorf("pin the database to CPUs %v: it needs at least one CPU and this run another (this process may use %d)", cpus, self.Count())
	}
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &before); err != nil {
		return nil, fmt.Errorf("read the CPU affinity of pid %d: %w", pid, err)
	}
	if err := setThreads(pid, &db); err != nil {
		_ = setThreads(pid, &before)
		return nil, err
	}
	if err := setThreads(os.Getpid(), &rest); err != nil {
		_ = setThreads(pid, &before)
		return nil, err
	}
	return func() {
		_ = setThreads(pid, &before)
		_ = setThreads(os.Getpid(), &self)
	}, nil
}

// setThreads sets the CPU affinity of every thread of pid.
func setThreads(pid int, set *unix.CPUSet) error {
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		return fmt.Errorf("list the threads of pid %d: %w", pid, err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		// A thread that ended since the listing is no error.
		if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("set the CPU affinity of thread %d of pid %d: %w", tid, pid, err)
		}
	}
	return nil
}
