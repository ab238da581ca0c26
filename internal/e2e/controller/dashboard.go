package main

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/e2e/controller/harness"
)

// editLoopID is the loop the dashboard scenarios edit.
const editLoopID = boundsLoop

// startSluiceDashboard builds and starts `sluice dashboard` on the e2e
// table, on a free loopback port, and returns its URL.
func (r *run) startSluiceDashboard(logDir string) (*harness.Proc, string, error) {
	bin := filepath.Join(logDir, "sluice")
	build := exec.CommandContext(r.Ctx, "go", "build", "-o", bin, "./cmd/sluice")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, "", fmt.Errorf("build sluice: %v: %s", err, out)
	}
	port, err := harness.FreePort()
	if err != nil {
		return nil, "", err
	}
	p, err := harness.Start(bin, logDir, "dashboard", []string{"SLUICE_TABLE=" + table}, "dashboard", "--listen", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return nil, "", err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := harness.WaitHTTP(r.Ctx, url+"/api/config", 60*time.Second, p); err != nil {
		p.Stop()
		return nil, "", fmt.Errorf("sluice dashboard: %w (log %s)", err, p.LogPath())
	}
	return p, url, nil
}

// dashboardEdits runs the dashboard scenarios: a DNS-rebinding request
// (another Host) is refused, and two concurrent edits made on the same
// version: one applied, the other refused as a conflict.
func (r *run) dashboardEdits(logDir string) error {
	p, url, err := r.startSluiceDashboard(logDir)
	if err != nil {
		return err
	}
	defer p.Stop()
	r.rebinding(url)
	return r.concurrentEdits(url)
}

// request sends a request with Host host and returns the status and body.
func request(method, url, host, body string) (int, string, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	if host != "" {
		req.Host = host
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b), nil
}

// rebinding: a page of rebind.example resolved to 127.0.0.1 reads and
// writes with Host rebind.example: both refused, nothing written.
func (r *run) rebinding(url string) {
	port := url[strings.LastIndex(url, ":"):]
	api := url + "/api/loops/" + editLoopID + "/params"
	before, _ := r.store.ReadParams(r.Ctx, editLoopID)
	getCode, _, err1 := request("GET", api, "rebind.example"+port, "")
	postCode, _, err2 := request("POST", api, "rebind.example"+port, `{"params":{"setpoint":33}}`)
	okCode, _, err3 := request("GET", api, "", "")
	after, _ := r.store.ReadParams(r.Ctx, editLoopID)
	r.Res.DashboardRebindingRefused = err1 == nil && err2 == nil && err3 == nil &&
		getCode == http.StatusMisdirectedRequest && postCode == http.StatusMisdirectedRequest && okCode == http.StatusOK &&
		after["setpoint"] == before["setpoint"]
	if !r.Res.DashboardRebindingRefused {
		r.Fail("dashboard_rebinding_refused: foreign Host GET %d, POST %d (%v %v), own GET %d (%v), setpoint %v -> %v; want 421, 421, 200 and unchanged",
			getCode, postCode, err1, err2, okCode, err3, before["setpoint"], after["setpoint"])
	}
}

// concurrentEdits: two operators loaded the form at the same version and
// save at once: exactly one is applied, the other answered 409, and the
// stored PARAMS are the applied one's.
func (r *run) concurrentEdits(url string) error {
	api := url + "/api/loops/" + editLoopID + "/params"
	_, body, err := request("GET", api, "", "")
	if err != nil {
		return err
	}
	version := jsonInt(body, `"version":`)
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i, sp := range []int{51, 52} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _, _ = request("POST", api, "", fmt.Sprintf(`{"params":{"setpoint":%d},"version":%d}`, sp, version))
		}()
	}
	wg.Wait()
	stored, err := r.store.ReadParams(r.Ctx, editLoopID)
	if err != nil {
		return err
	}
	winner := map[int]float64{0: 51, 1: 52}
	applied := -1
	for i, c := range codes {
		if c == http.StatusOK {
			applied = i
		}
	}
	r.Res.ConcurrentEditConflict = applied >= 0 && codes[1-applied] == http.StatusConflict && stored["setpoint"] == winner[applied]
	if !r.Res.ConcurrentEditConflict {
		r.Fail("concurrent_edit_conflict: answers %v, stored setpoint %v; want one 200 (its setpoint stored) and one 409", codes, stored["setpoint"])
	}
	r.Logf("concurrent edits at version %d: answers %v, stored setpoint %v", version, codes, stored["setpoint"])
	return nil
}

// jsonInt reads the integer after key in a JSON text (0 when absent).
func jsonInt(body, key string) int64 {
	i := strings.Index(body, key)
	if i < 0 {
		return 0
	}
	var n int64
	fmt.Sscan(strings.TrimLeft(body[i+len(key):], " "), &n)
	return n
}
