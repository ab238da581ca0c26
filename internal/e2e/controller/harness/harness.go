// Package harness starts and stops the real components of the controller's
// end-to-end run and integration tests: moto_server for DynamoDB and
// CloudWatch, and the controller's bootstrap under the AWS Lambda Runtime
// Interface Emulator, each on a free port of 127.0.0.1, each stopped by its
// own process id.
package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/poll"
)

// FreePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// RIEArgs are the arguments of the emulator that runs bootstrap listening
// on a free port of 127.0.0.1, its runtime API on another, and that port
// (where the function is invoked).
func RIEArgs(bootstrap string) (args []string, port int, err error) {
	port, err = FreePort()
	if err != nil {
		return nil, 0, err
	}
	api, err := FreePort()
	if err != nil {
		return nil, 0, err
	}
	return []string{"--runtime-interface-emulator-address", fmt.Sprintf("127.0.0.1:%d", port),
		"--runtime-api-address", fmt.Sprintf("127.0.0.1:%d", api), bootstrap}, port, nil
}

// Proc is a process this package started.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
}

// Start starts name with args in its own process group, its output in
// logDir/<logName>.log, with env added to this process's environment.
func Start(name, logDir, logName string, env []string, args ...string) (*Proc, error) {
	return start(name, logDir, logName, append(os.Environ(), env...), args...)
}

// start starts name with exactly the environment env.
func start(name, logDir, logName string, env []string, args ...string) (*Proc, error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(logDir, logName+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: logName, cmd: cmd, log: f, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// LogPath is the file with the process's output.
func (p *Proc) LogPath() string { return p.log.Name() }

// Stop ends the process group it started (SIGTERM, then SIGKILL after 5 s)
// and waits for it.
func (p *Proc) Stop() {
	if p == nil {
		return
	}
	if !p.Exited() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	p.log.Close()
}

// WaitHTTP polls url until it answers (any status) or timeout passes.
func WaitHTTP(ctx context.Context, url string, timeout time.Duration, p *Proc) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	return poll.Until(ctx, 100*time.Millisecond, func() (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			return true, nil
		}
		if p != nil && p.Exited() {
			return false, fmt.Errorf("%s exited before answering on %s (log %s)", p.Name, url, p.LogPath())
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("%s did not answer within %v: %w", url, timeout, err)
		}
		return false, nil
	})
}

// Moto is a moto_server this package started.
type Moto struct {
	*Proc
	Endpoint string
}

// Env returns the environment that points the AWS SDK and CLI at m.
func (m *Moto) Env() []string {
	return []string{
		"AWS_ENDPOINT_URL=" + m.Endpoint,
		"AWS_ACCESS_KEY_ID=test",
		"AWS_SECRET_ACCESS_KEY=test",
		"AWS_REGION=us-east-1",
		"AWS_DEFAULT_REGION=us-east-1",
		"AWS_PAGER=",
	}
}

// StartMoto starts moto's server (bin; "" means the repository's
// localstack/moto_serial.py, found from the working directory up, which
// serves one request at a time so that DynamoDB's conditional writes are
// atomic as in AWS; moto_server from PATH when there is none) on a free
// port and waits until it answers.
func StartMoto(ctx context.Context, bin, logDir string) (*Moto, error) {
	var args []string
	if bin == "" {
		bin = "moto_server"
		if script, ok := findUp(filepath.Join("localstack", "moto_serial.py")); ok {
			bin, args = "python3", []string{script}
		}
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	args = append(args, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	p, err := Start(bin, logDir, "moto", []string{"MOTO_ACCOUNT_ID=000000000000"}, args...)
	if err != nil {
		return nil, err
	}
	m := &Moto{Proc: p, Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port)}
	if err := WaitHTTP(ctx, m.Endpoint+"/moto-api/", 60*time.Second, p); err != nil {
		p.Stop()
		return nil, fmt.Errorf("moto_server: %w", err)
	}
	return m, nil
}

// RIE is a Runtime Interface Emulator serving one function.
type RIE struct {
	*Proc
	// InvokeURL is where to POST an event.
	InvokeURL string
}

// StartRIE starts the emulator rie on free ports with bootstrap as the
// function, env added to its environment (the function inherits it).
func StartRIE(ctx context.Context, rie, bootstrap, logDir, name string, env []string) (*RIE, error) {
	return startRIE(ctx, rie, bootstrap, logDir, name, append(os.Environ(), env...))
}

// StartRIEClean is StartRIE with exactly env as the function's environment
// (plus the emulator's timeout and log level): nothing of this process's
// environment leaks in, as in a deployed function.
func StartRIEClean(ctx context.Context, rie, bootstrap, logDir, name string, env []string) (*RIE, error) {
	return startRIE(ctx, rie, bootstrap, logDir, name, env)
}

func startRIE(ctx context.Context, rie, bootstrap, logDir, name string, env []string) (*RIE, error) {
	args, port, err := RIEArgs(bootstrap)
	if err != nil {
		return nil, err
	}
	env = append([]string{"AWS_LAMBDA_FUNCTION_TIMEOUT=60", "LOG_LEVEL=info"}, env...)
	p, err := start(rie, logDir, name, env, args...)
	if err != nil {
		return nil, err
	}
	r := &RIE{Proc: p, InvokeURL: fmt.Sprintf("http://127.0.0.1:%d/2015-03-31/functions/function/invocations", port)}
	if err := WaitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/", port), 30*time.Second, p); err != nil {
		p.Stop()
		return nil, fmt.Errorf("aws-lambda-rie: %w", err)
	}
	return r, nil
}

// Invoke posts payload to the function and returns its response body. The
// emulator answers 200 with the function's error document when the handler
// returns an error; that is reported as an error too.
func (r *RIE) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.InvokeURL, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Timeout: 90 * time.Second}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("invoke %s: %w", r.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("invoke %s: %w", r.Name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("invoke %s: HTTP %d: %s", r.Name, resp.StatusCode, body)
	}
	if bytes.Contains(body, []byte(`"errorMessage"`)) {
		return body, fmt.Errorf("invoke %s: function error: %s", r.Name, body)
	}
	return body, nil
}

// ErrNoBinary is returned by FindBinary when the binary is nowhere.
var ErrNoBinary = errors.New("binary not found")

// FindBinary returns the path named by the environment variable env, else
// the first of candidates that exists, else name from PATH.
func FindBinary(env, name string, candidates ...string) (string, error) {
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", env, p, err)
		}
		return p, nil
	}
	for _, c := range candidates {
		if _, err := os.Stat(c); err == nil {
			return c, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s (set %s): %w", name, env, ErrNoBinary)
}

// findUp looks for rel in the working directory and its parents.
func findUp(rel string) (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}
