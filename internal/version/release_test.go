package version

import (
	"archive/zip"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

const repoRoot = "../.."

// TestMakeReleasePlan checks, without building, that `make release` plans
// every part for both architectures under the version's name.
func TestMakeReleasePlan(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	out, err := exec.Command("make", "-C", repoRoot, "-n", "--no-print-directory", "release",
		"VERSION=v0.0.0-plan", "RELEASE_DIR="+t.TempDir()).CombinedOutput()
	if err != nil {
		t.Fatalf("make -n release: %v\n%s", err, out)
	}
	for _, arch := range []string{"arm64", "amd64"} {
		for _, name := range []string{"controller_v0.0.0-plan_linux_%s.zip", "sqs-consumer_v0.0.0-plan_linux_%s.zip",
			"kafka-consumer_v0.0.0-plan_linux_%s.zip", "worker-context_v0.0.0-plan_linux_%s.tar.gz",
			"sluice_v0.0.0-plan_linux_%s.tar.gz"} {
			if f := strings.Replace(name, "%s", arch, 1); !strings.Contains(string(out), f) {
				t.Errorf("make -n release plans no %s", f)
			}
		}
	}
	if !strings.Contains(string(out), "version.tag=v0.0.0-plan") {
		t.Errorf("make -n release links no version into the binaries:\n%s", out)
	}
}

// TestMakeRelease builds one part (the controller, for this machine's
// architecture) as `make release` does and checks the archive against
// SHA256SUMS and the bootstrap's first log line against the version.
func TestMakeRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the controller")
	}
	for _, tool := range []string{"make", "zip", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	dir := t.TempDir()
	out, err := exec.Command("make", "-C", repoRoot, "--no-print-directory", "release", "VERSION=v0.0.0-check",
		"RELEASE_ARCHES="+runtime.GOARCH, "RELEASE_PARTS=controller", "RELEASE_DIR="+dir).CombinedOutput()
	if err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}
	name := "controller_v0.0.0-check_linux_" + runtime.GOARCH + ".zip"
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fileSHA256(t, filepath.Join(dir, name)) + "  " + name + "\n"; string(sums) != want {
		t.Errorf("SHA256SUMS = %q; want %q", sums, want)
	}
	bootstrap := unzipOne(t, filepath.Join(dir, name), "bootstrap", dir)
	if got := firstLogLine(t, bootstrap); got["msg"] != "start" || got["version"] != "v0.0.0-check" {
		t.Errorf("bootstrap's first log line = %v; want msg start, version v0.0.0-check", got)
	}
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// unzipOne extracts the archive's only entry, which must be named want, into dir.
func unzipOne(t *testing.T, archive, want, dir string) string {
	t.Helper()
	r, err := zip.OpenReader(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(r.File) != 1 || r.File[0].Name != want {
		t.Fatalf("%s holds %d entries (first %q); want only %s", archive, len(r.File), r.File[0].Name, want)
	}
	src, err := r.File[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	path := filepath.Join(dir, want)
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// firstLogLine runs the bootstrap outside Lambda (it logs its start, then
// exits for want of the runtime API) and decodes the first line it prints.
func firstLogLine(t *testing.T, bootstrap string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bootstrap)
	cmd.Env = []string{"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test"}
	out, _ := cmd.Output()
	line, _ := bufio.NewReader(strings.NewReader(string(out))).ReadString('\n')
	var got map[string]any
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("bootstrap's first line %q: %v", line, err)
	}
	return got
}
