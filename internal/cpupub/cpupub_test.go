package cpupub

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/sluice-dev/sluice/internal/testclock"
)

// fakeProc is a /proc and /sys/fs/cgroup tree, path to contents; tree
// writes it under a test's temporary directory.
type fakeProc map[string]string

// host writes the tree and returns a Host that reads it: paths under /proc
// go to the proc root, under /sys/fs/cgroup to the cgroup root. A path
// ending in "/" is an empty directory (a process whose files are gone).
func (f fakeProc) host(t *testing.T) Host {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	for path, v := range f {
		full := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(path, "/sys/fs")))
		if strings.HasSuffix(path, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := NewHost(filepath.Join(root, "proc"), filepath.Join(root, "cgroup"))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// stat is /proc/<pid>/stat with all 52 fields of Linux 5.x.
func stat(pid int, comm string, utime, stime uint64) string {
	return fmt.Sprintf("%d (%s) S 1 %d %d 0 -1 4194624 1000 0 0 0 %d %d 0 0 20 0 30 0 123 1000000 5000 18446744073709551615 0 0 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n", pid, comm, pid, pid, utime, stime)
}

func TestStatTicks(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    uint64
		wantErr bool
	}{
		{"plain", stat(7, "mariadbd", 150, 50), 200, false},
		{"name with spaces and parens", stat(7, "a) (b c", 3, 4), 7, false},
		{"no paren", "7 mariadbd S 1", 0, true},
		{"short", "7 (mariadbd) S 1 2 3", 0, true},
		{"not a number", "7 (m) S 1 7 7 0 -1 4 1 0 0 0 x 4 0", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := fakeProc{"/proc/7/stat": tt.in}.host(t)
			got, err := h.cpuTicks(7)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("cpuTicks(stat %q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "pid 7: parse stat") {
				t.Errorf("cpuTicks(stat %q) error %q; want it to say pid 7: parse stat", tt.in, err)
			}
		})
	}
}

// TestAffinityCores counts the CPUs of Cpus_allowed_list. procfs parses the
// list leniently (a number it cannot read counts as CPU 0); a list that
// yields no CPU is an error.
func TestAffinityCores(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{"0", 1, false}, {"0-1", 2, false}, {"0-3,6,8-9", 7, false},
		{"3-1", 0, true},
	}
	for _, tt := range tests {
		h := fakeProc{"/proc/9/status": "Name:\tx\nCpus_allowed_list:\t" + tt.in + "\n"}.host(t)
		got, err := h.affinityCores(9)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("affinityCores(Cpus_allowed_list %q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestCores(t *testing.T) {
	status := "Name:\tmariadbd\nCpus_allowed:\tf\nCpus_allowed_list:\t0-3\n"
	tests := []struct {
		name    string
		proc    fakeProc
		want    float64
		wantErr bool
	}{
		{"affinity only", fakeProc{"/proc/9/status": status}, 4, false},
		{"cgroup v2 quota", fakeProc{
			"/proc/9/status":                  status,
			"/proc/9/cgroup":                  "0::/db.slice\n",
			"/sys/fs/cgroup/db.slice/cpu.max": "150000 100000\n",
		}, 1.5, false},
		{"cgroup v2 unlimited", fakeProc{
			"/proc/9/status":                  status,
			"/proc/9/cgroup":                  "0::/db.slice\n",
			"/sys/fs/cgroup/db.slice/cpu.max": "max 100000\n",
		}, 4, false},
		{"cgroup v1 quota", fakeProc{
			"/proc/9/status": status,
			"/proc/9/cgroup": "4:memory:/x\n3:cpu,cpuacct:/db\n0::/\n",
			"/sys/fs/cgroup/cpu,cpuacct/db/cpu.cfs_quota_us":  "200000\n",
			"/sys/fs/cgroup/cpu,cpuacct/db/cpu.cfs_period_us": "100000\n",
		}, 2, false},
		{"cgroup v1 quota under the cpu mount", fakeProc{
			"/proc/9/status":                          status,
			"/proc/9/cgroup":                          "3:cpu,cpuacct:/db\n",
			"/sys/fs/cgroup/cpu/db/cpu.cfs_quota_us":  "50000\n",
			"/sys/fs/cgroup/cpu/db/cpu.cfs_period_us": "100000\n",
		}, 0.5, false},
		{"cgroup v1 unlimited", fakeProc{
			"/proc/9/status":                       status,
			"/proc/9/cgroup":                       "1:cpu:/\n0::/\n",
			"/sys/fs/cgroup/cpu/cpu.cfs_quota_us":  "-1\n",
			"/sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n",
		}, 4, false},
		{"no status", fakeProc{"/proc/9/": ""}, 0, true},
		{"no process", fakeProc{}, 0, true},
		{"no affinity line", fakeProc{"/proc/9/status": "Name:\tx\n"}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Cores(tt.proc.host(t), 9)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("Cores() = %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func auxv(pairs ...uint64) string {
	b := make([]byte, 8*len(pairs))
	for i, v := range pairs {
		binary.LittleEndian.PutUint64(b[8*i:], v)
	}
	return string(b)
}

func TestClockTicks(t *testing.T) {
	tests := []struct {
		name string
		proc fakeProc
		want int
	}{
		{"from auxv", fakeProc{"/proc/self/auxv": auxv(6, 4096, 17, 250, 0, 0)}, 250},
		{"missing entry", fakeProc{"/proc/self/auxv": auxv(6, 4096, 0, 0)}, DefaultClockTicks},
		{"unreadable", fakeProc{}, DefaultClockTicks},
	}
	for _, tt := range tests {
		if got := ClockTicks(tt.proc.host(t)); got != tt.want {
			t.Errorf("%s: ClockTicks() = %d; want %d", tt.name, got, tt.want)
		}
	}
	// On this machine, the same as getconf CLK_TCK (100 on Linux).
	live, err := LiveHost()
	if err != nil {
		t.Fatal(err)
	}
	if got := ClockTicks(live); got != 100 {
		t.Errorf("ClockTicks(LiveHost()) = %d; want 100", got)
	}
}

func TestFindProcess(t *testing.T) {
	proc := fakeProc{"/proc/1/comm": "init\n", "/proc/42/comm": "mariadbd\n", "/proc/43/comm": "mariadb\n", "/proc/44/": "", "/proc/self/auxv": ""}
	if pid, err := FindProcess(proc.host(t), "mariadbd"); err != nil || pid != 42 {
		t.Errorf("FindProcess(mariadbd) = %d, %v; want 42", pid, err)
	}
	without := fakeProc{"/proc/1/comm": "init\n", "/proc/43/comm": "mariadb\n"}
	if _, err := FindProcess(without.host(t), "mariadbd"); err == nil {
		t.Errorf("FindProcess without mariadbd: no error")
	}
	proc["/proc/44/comm"] = "mariadbd\n"
	if _, err := FindProcess(proc.host(t), "mariadbd"); err == nil {
		t.Errorf("FindProcess with two mariadbd: no error")
	}
}

func TestUtilization(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := &Sampler{Cores: 2}
	tests := []struct {
		name      string
		prev, cur Sample
		want      float64
		wantErr   bool
	}{
		{"one core of two", Sample{t0, 10 * time.Second}, Sample{t0.Add(10 * time.Second), 20 * time.Second}, 50, false},
		{"idle", Sample{t0, time.Second}, Sample{t0.Add(5 * time.Second), time.Second}, 0, false},
		{"both cores", Sample{t0, 0}, Sample{t0.Add(time.Second), 2 * time.Second}, 100, false},
		{"empty interval", Sample{t0, 0}, Sample{t0, time.Second}, 0, true},
		{"restarted", Sample{t0, 5 * time.Second}, Sample{t0.Add(time.Second), time.Second}, 0, true},
	}
	for _, tt := range tests {
		got, err := s.Utilization(tt.prev, tt.cur)
		if (err != nil) != tt.wantErr || math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("%s: Utilization = %v, %v; want %v, error %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

// recordingPutter records PutMetricData calls.
type recordingPutter struct {
	calls []*cloudwatch.PutMetricDataInput
	fail  int // fail this many calls first
}

func (r *recordingPutter) PutMetricData(_ context.Context, in *cloudwatch.PutMetricDataInput, _ ...func(*cloudwatch.Options)) (*cloudwatch.PutMetricDataOutput, error) {
	if r.fail > 0 {
		r.fail--
		return nil, fmt.Errorf("throttled")
	}
	r.calls = append(r.calls, in)
	return &cloudwatch.PutMetricDataOutput{}, nil
}

// TestPublisher drives the publisher on a fake clock over a process that
// uses 0.5, then 1.5 cores of 2, and checks each datapoint's period, value
// and the RDS metric identity.
func TestPublisher(t *testing.T) {
	clock := testclock.New(time.Unix(1_000_003, 0)) // 3 s into a 10 s period
	proc := fakeProc{"/proc/7/stat": stat(7, "mariadbd", 0, 0)}
	host := proc.host(t)
	hz := uint64(100)
	ticksAt := func(now time.Time) uint64 {
		// 0.5 core until 1_000_030, then 1.5 cores.
		s := float64(now.Unix() - 1_000_000)
		if s <= 30 {
			return uint64(0.5 * s * float64(hz))
		}
		return uint64((15 + 1.5*(s-30)) * float64(hz))
	}
	sampler := &rewritingSampler{Sampler: &Sampler{Host: host, PID: 7, Hz: int(hz), Cores: 2, Now: clock.Now}, rewrite: func() error {
		return os.WriteFile(filepath.Join(host.procRoot, "7", "stat"), []byte(stat(7, "mariadbd", ticksAt(clock.Now()), 0)), 0o644)
	}}
	api := &recordingPutter{fail: 1}
	var seen []Datapoint
	p := &Publisher{CPU: sampler, API: api, Instance: "sluice-db", Period: 10 * time.Second, Delay: 5 * time.Second, Clock: clock,
		OnDatapoint: func(d Datapoint) { seen = append(seen, d) }}
	ctx, cancel := context.WithCancel(context.Background())
	// Run until the fake clock passes 1_000_061.
	done := make(chan struct{})
	p.Clock = &testclock.Stopper{Clock: clock, Until: time.Unix(1_000_061, 0), Cancel: cancel}
	go func() { p.Run(ctx); close(done) }()
	<-done

	want := []Datapoint{
		{Start: time.Unix(1_000_010, 0), Period: 10 * time.Second, Value: 25},
		{Start: time.Unix(1_000_020, 0), Period: 10 * time.Second, Value: 25},
		{Start: time.Unix(1_000_030, 0), Period: 10 * time.Second, Value: 75},
		{Start: time.Unix(1_000_040, 0), Period: 10 * time.Second, Value: 75},
	}
	if len(seen) != len(want) {
		t.Fatalf("published %d datapoints %+v; want %d", len(seen), seen, len(want))
	}
	for i, w := range want {
		if !seen[i].Start.Equal(w.Start) || math.Abs(seen[i].Value-w.Value) > 1e-9 || seen[i].Period != w.Period {
			t.Errorf("datapoint %d = %+v; want %+v", i, seen[i], w)
		}
	}
	in := api.calls[0]
	d := in.MetricData[0]
	if aws.ToString(in.Namespace) != "AWS/RDS" || aws.ToString(d.MetricName) != "CPUUtilization" ||
		len(d.Dimensions) != 1 || aws.ToString(d.Dimensions[0].Name) != "DBInstanceIdentifier" ||
		aws.ToString(d.Dimensions[0].Value) != "sluice-db" || aws.ToInt32(d.StorageResolution) != 1 || d.Unit != "Percent" {
		t.Errorf("PutMetricData input = %+v %+v; want AWS/RDS CPUUtilization DBInstanceIdentifier=sluice-db, high resolution, Percent", in, d)
	}
}

// rewritingSampler writes the process's stat file before each sample, as
// the kernel updates it.
type rewritingSampler struct {
	*Sampler
	rewrite func() error
}

func (r *rewritingSampler) Sample() (Sample, error) {
	if err := r.rewrite(); err != nil {
		return Sample{}, err
	}
	return r.Sampler.Sample()
}

func TestSamplerFindsRestartedProcess(t *testing.T) {
	proc := fakeProc{"/proc/8/stat": stat(8, "mariadbd", 500, 100)}
	now := time.Unix(1000, 0)
	s := &Sampler{Host: proc.host(t), PID: 7, Hz: 100, Cores: 1, Now: func() time.Time { return now },
		Find: func() (int, error) { return 8, nil }}
	got, err := s.Sample()
	if err != nil || s.PID != 8 || got.CPU != 6*time.Second {
		t.Errorf("Sample after a restart = %+v, %v (pid %d); want 6s of pid 8", got, err, s.PID)
	}
	s.Find = nil
	s.PID = 9
	_, err = s.Sample()
	if err == nil {
		t.Errorf("Sample of a vanished pid without Find: no error")
	} else if !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "read CPU time of pid 9: ") {
		t.Errorf("Sample of a vanished pid = %q; want read CPU time of pid 9: ..., a file that does not exist", err)
	}
}

// TestNewSamplerFixture builds a sampler over a fixture tree: found by a
// find function with the cores its affinity and cgroup allow, and its
// clock tick rate from the auxiliary vector.
func TestNewSamplerFixture(t *testing.T) {
	h := fakeProc{
		"/proc/5/stat":              stat(5, "mariadbd", 30, 20),
		"/proc/5/status":            "Name:\tmariadbd\nCpus_allowed_list:\t0-7\n",
		"/proc/5/cgroup":            "0::/db\n",
		"/proc/self/auxv":           auxv(17, 250, 0, 0),
		"/sys/fs/cgroup/db/cpu.max": "300000 100000\n",
	}.host(t)
	s, err := newSampler(h, 0, func() (int, error) { return 5, nil }, 0)
	if err != nil {
		t.Fatalf("newSampler: %v", err)
	}
	if s.PID != 5 || s.Cores != 3 || s.Hz != 250 {
		t.Errorf("newSampler = pid %d, %v cores, %d Hz; want pid 5, 3 cores, 250 Hz", s.PID, s.Cores, s.Hz)
	}
	if got, err := s.Sample(); err != nil || got.CPU != 200*time.Millisecond {
		t.Errorf("Sample() = %+v, %v; want 200ms (50 ticks at 250 Hz)", got, err)
	}
	if _, err := newSampler(h, 6, nil, 0); err == nil {
		t.Errorf("newSampler of pid 6, which does not run: no error")
	}
}

// TestNewSamplerLive builds samplers over this test's own process in the
// live /proc: found by a find function with the cores it may use, or given
// by pid with the cores said; a find that fails is the error.
func TestNewSamplerLive(t *testing.T) {
	self := os.Getpid()
	s, err := NewSampler(0, func() (int, error) { return self, nil }, 0)
	if err != nil {
		t.Fatalf("NewSampler by find: %v", err)
	}
	if s.PID != self || s.Cores <= 0 || s.Find == nil {
		t.Errorf("NewSampler by find = pid %d, %v cores, find set %v; want pid %d, cores > 0, find set", s.PID, s.Cores, s.Find != nil, self)
	}
	if _, err := s.Sample(); err != nil {
		t.Errorf("Sample: %v", err)
	}
	if s, err = NewSampler(self, nil, 1.5); err != nil || s.PID != self || s.Cores != 1.5 {
		t.Errorf("NewSampler(%d, nil, 1.5) = %+v, %v; want that pid and 1.5 cores", self, s, err)
	}
	if _, err := NewSampler(0, Named("no-such-process-sluice"), 0); err == nil {
		t.Errorf("NewSampler of a process that does not run = nil error; want one")
	}
	if _, err := NewSampler(0, nil, 0); err == nil {
		t.Errorf("NewSampler with no pid and no find = nil error; want one")
	}
}
