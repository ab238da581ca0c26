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
//
// The files of /proc are parsed by github.com/prometheus/procfs; what it
// does not read (the auxiliary vector's clock tick rate, the cgroup's CPU
// quota files) is read here.
package cpupub

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs"

	"github.com/sluice-dev/sluice/internal/defaults"
)

// DefaultClockTicks is USER_HZ on every Linux architecture Go supports; it
// is used when /proc/self/auxv does not say.
const DefaultClockTicks = 100

// atClkTck is the auxiliary vector entry type of the clock tick rate.
const atClkTck = 17

// Host is where processes are read: a proc file system and the mount point
// of the cgroup file systems. LiveHost is this machine's; a test points
// NewHost at a fixture tree.
type Host struct {
	proc     procfs.FS
	procRoot string
	cgroup   string
}

// NewHost reads processes from the proc file system mounted at procRoot
// (/proc) and cgroups from cgroupRoot (/sys/fs/cgroup).
func NewHost(procRoot, cgroupRoot string) (Host, error) {
	p, err := procfs.NewFS(procRoot)
	if err != nil {
		return Host{}, fmt.Errorf("proc file system at %s: %w", procRoot, err)
	}
	return Host{proc: p, procRoot: procRoot, cgroup: cgroupRoot}, nil
}

// LiveHost is this machine's /proc and /sys/fs/cgroup.
func LiveHost() (Host, error) { return NewHost(procfs.DefaultMountPoint, "/sys/fs/cgroup") }

// ClockTicks returns the kernel's clock tick rate (the unit of utime and
// stime) from the auxiliary vector in /proc/self/auxv, which is what
// sysconf(_SC_CLK_TCK) reads; DefaultClockTicks when it cannot be read.
func ClockTicks(h Host) int {
	b, err := os.ReadFile(filepath.Join(h.procRoot, "self", "auxv"))
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

// cpuTicks returns utime + stime of process pid, in clock ticks. A process
// that cannot be read (it does not run) is an error that says "read"; a
// stat file that does not parse is one that says "parse stat".
func (h Host) cpuTicks(pid int) (uint64, error) {
	p, err := h.proc.Proc(pid)
	var st procfs.ProcStat
	if err == nil {
		st, err = p.Stat()
	}
	var pathErr *fs.PathError
	switch {
	case errors.As(err, &pathErr):
		return 0, fmt.Errorf("read CPU time of pid %d: %w", pid, err)
	case err != nil:
		return 0, fmt.Errorf("pid %d: parse stat: %w", pid, err)
	}
	return uint64(st.UTime) + uint64(st.STime), nil
}

// affinityCores returns the number of CPUs the process may run on.
func (h Host) affinityCores(pid int) (int, error) {
	p, err := h.proc.Proc(pid)
	var st procfs.ProcStatus
	if err == nil {
		st, err = p.NewStatus()
	}
	if err != nil {
		return 0, fmt.Errorf("read status of pid %d: %w", pid, err)
	}
	if len(st.CpusAllowedList) == 0 {
		return 0, fmt.Errorf("status of pid %d has no Cpus_allowed_list, or an empty one", pid)
	}
	return len(st.CpusAllowedList), nil
}

// quotaCores returns the CPU quota of the process's cgroup in cores, or
// +Inf when it has none. cgroup v2 (hierarchy 0 without controllers,
// cpu.max) and v1 (the cpu controller, cpu.cfs_quota_us and
// cpu.cfs_period_us) are read.
func (h Host) quotaCores(pid int) float64 {
	q := math.Inf(1)
	p, err := h.proc.Proc(pid)
	if err != nil {
		return q
	}
	groups, err := p.Cgroups()
	if err != nil {
		return q
	}
	for _, g := range groups {
		path := strings.TrimSuffix(g.Path, "/")
		switch {
		case g.HierarchyID == 0 && len(g.Controllers) == 0:
			f := strings.Fields(h.readCgroup(path, "cpu.max"))
			if len(f) == 2 && f[0] != "max" {
				q = math.Min(q, ratio(f[0], f[1]))
			}
		case hasController(g.Controllers, "cpu"):
			dir := strings.Join(g.Controllers, ",") + path
			quota, period := h.readCgroup(dir, "cpu.cfs_quota_us"), h.readCgroup(dir, "cpu.cfs_period_us")
			if quota == "" || period == "" {
				dir = "cpu" + path
				quota, period = h.readCgroup(dir, "cpu.cfs_quota_us"), h.readCgroup(dir, "cpu.cfs_period_us")
			}
			q = math.Min(q, ratio(quota, period))
		}
	}
	return q
}

// readCgroup returns the trimmed contents of file in directory dir of the
// cgroup mount point, or "" when it cannot be read.
func (h Host) readCgroup(dir, file string) string {
	b, err := os.ReadFile(filepath.Join(h.cgroup, dir, file))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// ratio returns quota/period in cores, or +Inf when either is not a
// positive number (no quota: cgroup v1 writes -1).
func ratio(quota, period string) float64 {
	qv, err1 := strconv.ParseFloat(quota, 64)
	pv, err2 := strconv.ParseFloat(period, 64)
	if err1 != nil || err2 != nil || qv <= 0 || pv <= 0 {
		return math.Inf(1)
	}
	return qv / pv
}

func hasController(list []string, name string) bool {
	for _, c := range list {
		if c == name {
			return true
		}
	}
	return false
}

// Cores returns the number of cores process pid may use: the smaller of its
// CPU affinity and its cgroup quota (which may be fractional).
func Cores(h Host, pid int) (float64, error) {
	n, err := h.affinityCores(pid)
	if err != nil {
		return 0, err
	}
	return math.Min(float64(n), h.quotaCores(pid)), nil
}

// Sample is one reading of a process's cumulative CPU time.
type Sample struct {
	At time.Time
	// CPU is the process's cumulative user + system CPU time.
	CPU time.Duration
}

// Sampler reads the cumulative CPU time of one process.
type Sampler struct {
	Host Host
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
	ticks, err := s.Host.cpuTicks(s.PID)
	if err != nil && s.Find != nil {
		if pid, ferr := s.Find(); ferr == nil && pid != s.PID {
			s.PID = pid
			ticks, err = s.Host.cpuTicks(s.PID)
		}
	}
	if err != nil {
		return Sample{}, err
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

// FindProcess returns the pid of the process whose command name
// (/proc/<pid>/comm) is name. It is an error when none or more than one
// matches.
func FindProcess(h Host, name string) (int, error) {
	procs, err := h.proc.AllProcs()
	if err != nil {
		return 0, fmt.Errorf("list processes to find %q: %w", name, err)
	}
	var found []int
	for _, p := range procs {
		comm, err := p.Comm()
		if err != nil {
			continue // the process ended meanwhile
		}
		if comm == name {
			found = append(found, p.PID)
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
// name in the live /proc (FindProcess on LiveHost).
func Named(name string) func() (int, error) {
	return func() (int, error) {
		h, err := LiveHost()
		if err != nil {
			return 0, err
		}
		return FindProcess(h, name)
	}
}

// NewSampler is a Sampler over the live /proc and the wall clock. It samples
// process pid, or when pid is 0 the process find returns; find (nil: none)
// also finds the process again after a restart. 100 % is cores, or when
// cores <= 0 the cores the process may use (Cores).
func NewSampler(pid int, find func() (int, error), cores float64) (*Sampler, error) {
	h, err := LiveHost()
	if err != nil {
		return nil, err
	}
	return newSampler(h, pid, find, cores)
}

// newSampler is NewSampler on host h.
func newSampler(h Host, pid int, find func() (int, error), cores float64) (*Sampler, error) {
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
		if cores, err = Cores(h, pid); err != nil {
			return nil, err
		}
	}
	return &Sampler{Host: h, PID: pid, Hz: ClockTicks(h), Cores: cores, Now: time.Now, Find: find}, nil
}
