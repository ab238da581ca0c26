// Package cpupub measures the CPU utilization of one process (the MariaDB
// server, mariadbd) from /proc and publishes it to CloudWatch as RDS does:
// namespace AWS/RDS, metric CPUUtilization, dimension DBInstanceIdentifier,
// one datapoint per metric period, the average over that period.
//
// Utilization is the process's CPU time (utime + stime of /proc/<pid>/stat,
// all its threads, in clock ticks of AT_CLKTCK) consumed over a wall-clock
// interval, divided by that interval and by the number of cores the process
// may use, times 100. The core count is the smallest of the process's CPU
// affinity (Cpus_allowed_list in /proc/<pid>/status) and its cgroup CPU
// quota (cgroup v2 cpu.max, or v1 cpu.cfs_quota_us / cpu.cfs_period_us),
// unless a count is configured. So 100 % means the database uses every core
// it may use, as RDS's CPUUtilization means every vCPU of the instance.
package cpupub

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/defaults"
)

// ReadFileFunc reads a whole file; os.ReadFile in production, a map in
// tests.
type ReadFileFunc func(path string) ([]byte, error)

// DefaultClockTicks is USER_HZ on every Linux architecture Go supports; it
// is used when /proc/self/auxv does not say.
const DefaultClockTicks = 100

// atClkTck is the auxiliary vector entry type of the clock tick rate.
const atClkTck = 17

// ClockTicks returns the kernel's clock tick rate (the unit of utime and
// stime) from the auxiliary vector in /proc/self/auxv, which is what
// sysconf(_SC_CLK_TCK) reads; DefaultClockTicks when it cannot be read.
func ClockTicks(read ReadFileFunc) int {
	b, err := read("/proc/self/auxv")
	if err != nil {
		return DefaultClockTicks
	}
	for i := 0; i+16 <= len(b); i += 16 {
		typ := binary.LittleEndian.Uint64(b[i:])
		val := binary.LittleEndian.Uint64(b[i+8:])
		if typ == 0 {
			break
		}
		if typ == atClkTck && val > 0 && val < 1e6 {
			return int(val)
		}
	}
	return DefaultClockTicks
}

// ParseStat returns utime + stime, in clock ticks, from the contents of
// /proc/<pid>/stat. The command name (field 2) may hold spaces and
// parentheses, so the fields are counted from the last ')'.
func ParseStat(b []byte) (uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("parse stat: no ')' after the command name")
	}
	// After ") ": field 3 (state) is index 0; utime is field 14, stime 15.
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("parse stat: %d fields after the command name, want at least 13", len(f))
	}
	ut, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse stat: utime %q: %w", f[11], err)
	}
	st, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse stat: stime %q: %w", f[12], err)
	}
	return ut + st, nil
}

// ParseCPUList counts the CPUs of a list such as "0-3,6,8-9".
func ParseCPUList(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty CPU list")
	}
	n := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, fmt.Errorf("CPU list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return 0, fmt.Errorf("CPU list %q: %w", s, err)
			}
		}
		if b < a || a < 0 {
			return 0, fmt.Errorf("CPU list %q: bad range %q", s, part)
		}
		n += b - a + 1
	}
	return n, nil
}

// affinityCores returns the number of CPUs the process may run on.
func affinityCores(read ReadFileFunc, pid int) (int, error) {
	b, err := read(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read status of pid %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return ParseCPUList(v)
		}
	}
	return 0, fmt.Errorf("status of pid %d has no Cpus_allowed_list", pid)
}

// quotaCores returns the CPU quota of the process's cgroup in cores, or
// +Inf when it has none. cgroup v2 (the "0::" line, cpu.max) and v1 (the
// cpu controller, cpu.cfs_quota_us and cpu.cfs_period_us) are read.
func quotaCores(read ReadFileFunc, pid int) float64 {
	b, err := read(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return math.Inf(1)
	}
	q := math.Inf(1)
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		ctrls, path := parts[1], strings.TrimSuffix(parts[2], "/")
		switch {
		case parts[0] == "0" && ctrls == "":
			if m, err := read("/sys/fs/cgroup" + path + "/cpu.max"); err == nil {
				f := strings.Fields(string(m))
				if len(f) == 2 && f[0] != "max" {
					quota, err1 := strconv.ParseFloat(f[0], 64)
					period, err2 := strconv.ParseFloat(f[1], 64)
					if err1 == nil && err2 == nil && quota > 0 && period > 0 {
						q = math.Min(q, quota/period)
					}
				}
			}
		case hasController(ctrls, "cpu"):
			dir := "/sys/fs/cgroup/" + ctrls + path
			qb, err1 := read(dir + "/cpu.cfs_quota_us")
			pb, err2 := read(dir + "/cpu.cfs_period_us")
			if err1 != nil || err2 != nil {
				dir = "/sys/fs/cgroup/cpu" + path
				qb, err1 = read(dir + "/cpu.cfs_quota_us")
				pb, err2 = read(dir + "/cpu.cfs_period_us")
			}
			if err1 == nil && err2 == nil {
				quota, e1 := strconv.ParseFloat(strings.TrimSpace(string(qb)), 64)
				period, e2 := strconv.ParseFloat(strings.TrimSpace(string(pb)), 64)
				if e1 == nil && e2 == nil && quota > 0 && period > 0 {
					q = math.Min(q, quota/period)
				}
			}
		}
	}
	return q
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// Cores returns the number of cores process pid may use: the smaller of its
// CPU affinity and its cgroup quota (which may be fractional).
func Cores(read ReadFileFunc, pid int) (float64, error) {
	n, err := affinityCores(read, pid)
	if err != nil {
		return 0, err
	}
	return math.Min(float64(n), quotaCores(read, pid)), nil
}

// Sample is one reading of a process's cumulative CPU time.
type Sample struct {
	At time.Time
	// CPU is the process's cumulative user + system CPU time.
	CPU time.Duration
}

// Sampler reads the cumulative CPU time of one process.
type Sampler struct {
	Read ReadFileFunc
	PID  int
	// Hz is the clock tick rate of /proc's utime and stime (ClockTicks).
	Hz int
	// Cores is what 100 % means: the cores the process may use (Cores).
	Cores float64
	Now   func() time.Time
	// Find, when set, finds the process again when PID has gone (the
	// database was restarted); the CPU time then restarts from zero, which
	// Utilization reports as an error for the one interval that spans the
	// restart.
	Find func() (int, error)
}

// Sample reads the process's CPU time now.
func (s *Sampler) Sample() (Sample, error) {
	b, err := s.Read(fmt.Sprintf("/proc/%d/stat", s.PID))
	if err != nil && s.Find != nil {
		if pid, ferr := s.Find(); ferr == nil && pid != s.PID {
			s.PID = pid
			b, err = s.Read(fmt.Sprintf("/proc/%d/stat", s.PID))
		}
	}
	if err != nil {
		return Sample{}, fmt.Errorf("read CPU time of pid %d: %w", s.PID, err)
	}
	ticks, err := ParseStat(b)
	if err != nil {
		return Sample{}, fmt.Errorf("pid %d: %w", s.PID, err)
	}
	hz := defaults.Positive(s.Hz, DefaultClockTicks)
	return Sample{At: s.Now(), CPU: time.Duration(ticks) * time.Second / time.Duration(hz)}, nil
}

// Utilization is the CPU utilization between two samples, percent of the
// sampler's cores: CPU time used / wall time / cores x 100. It returns an
// error when the interval is empty or the CPU time went backwards (the
// process was restarted).
func (s *Sampler) Utilization(prev, cur Sample) (float64, error) {
	wall := cur.At.Sub(prev.At)
	if wall <= 0 {
		return 0, fmt.Errorf("utilization over %v: the interval must be positive", wall)
	}
	if cur.CPU < prev.CPU {
		return 0, fmt.Errorf("CPU time went from %v to %v: the process restarted", prev.CPU, cur.CPU)
	}
	if s.Cores <= 0 {
		return 0, fmt.Errorf("cores %v: must be positive", s.Cores)
	}
	return 100 * (cur.CPU - prev.CPU).Seconds() / wall.Seconds() / s.Cores, nil
}

// PIDs lists the numeric entries of /proc: the candidates of FindProcess.
func PIDs() []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

// FindProcess returns the pid of the process whose command name
// (/proc/<pid>/comm) is name; pids lists the candidates (the numeric entries
// of /proc). It is an error when none or more than one matches.
func FindProcess(read ReadFileFunc, pids []int, name string) (int, error) {
	var found []int
	for _, pid := range pids {
		b, err := read(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil {
			continue // the process ended meanwhile
		}
		if strings.TrimSpace(string(b)) == name {
			found = append(found, pid)
		}
	}
	switch len(found) {
	case 0:
		return 0, fmt.Errorf("no process named %q is running", name)
	case 1:
		return found[0], nil
	}
	return 0, fmt.Errorf("%d processes are named %q (pids %v): give the pid", len(found), name, found)
}

// Named returns a function that finds the process whose command name is
// name in the live /proc (FindProcess over PIDs).
func Named(name string) func() (int, error) {
	return func() (int, error) { return FindProcess(os.ReadFile, PIDs(), name) }
}

// NewSampler is a Sampler over the live /proc and the wall clock. It samples
// process pid, or when pid is 0 the process find returns; find (nil: none)
// also finds the process again after a restart. 100 % is cores, or when
// cores <= 0 the cores the process may use (Cores).
func NewSampler(pid int, find func() (int, error), cores float64) (*Sampler, error) {
	var err error
	if pid == 0 {
		if find == nil {
			return nil, errors.New("cpu sampler: no pid and no way to find the process")
		}
		if pid, err = find(); err != nil {
			return nil, err
		}
	}
	if cores <= 0 {
		if cores, err = Cores(os.ReadFile, pid); err != nil {
			return nil, err
		}
	}
	return &Sampler{Read: os.ReadFile, PID: pid, Hz: ClockTicks(os.ReadFile), Cores: cores, Now: time.Now, Find: find}, nil
}
