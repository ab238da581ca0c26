package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestCheckStaticARM64 builds a tiny program for aarch64 (passes) and for
// amd64 (fails); a file that is no ELF fails.
func TestCheckStaticARM64(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	build := func(name string, env ...string) string {
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", out, src)
		cmd.Env = append(os.Environ(), env...)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("go build %s: %v: %s", name, err, b)
		}
		return out
	}
	if err := checkStaticARM64(build("arm64", "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")); err != nil {
		t.Errorf("checkStaticARM64(static arm64) = %v; want nil", err)
	}
	if err := checkStaticARM64(build("amd64", "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")); err == nil {
		t.Errorf("checkStaticARM64(amd64) = nil; want an error")
	}
	if err := checkStaticARM64(src); err == nil {
		t.Errorf("checkStaticARM64(source file) = nil; want an error")
	}
}
