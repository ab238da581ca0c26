package main

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// samEnv is the environment of every SAM CLI call: no telemetry, no
// update check.
var samEnv = []string{"SAM_CLI_TELEMETRY=0", "SAM_CLI_DISABLE_VERSION_CHECK=1"}

// command runs name with args and extra environment, its output echoed to
// stderr, and returns its standard output.
func (r *runner) command(env []string, name string, args ...string) ([]byte, error) {
	r.Logf("$ %s %s", filepath.Base(name), strings.Join(args, " "))
	cmd := exec.CommandContext(r.Ctx, name, args...)
	cmd.Env = append(append(os.Environ(), samEnv...), env...)
	var out, stderr bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = io.MultiWriter(os.Stderr, &stderr)
	err := cmd.Run()
	if err != nil {
		return out.Bytes(), fmt.Errorf("%s %s: %w: %s", filepath.Base(name), args[0], err, lastLines(out.String()+stderr.String(), 5))
	}
	return out.Bytes(), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], " | ")
}

var samVersionRE = regexp.MustCompile(`version (\S+)`)

// build runs sam --version, sam validate --lint and sam build, then checks
// the bootstraps.
func (r *runner) build() {
	out, err := r.command(nil, r.o.sam, "--version")
	if err != nil {
		r.Fail("SAM CLI: %v (make sam-cli installs it)", err)
		return
	}
	if m := samVersionRE.FindSubmatch(out); m != nil {
		r.res.SamVersion = string(m[1])
	}
	if _, err := r.command(nil, r.o.sam, "validate", "--lint", "--template-file", r.o.template); err != nil {
		r.Fail("validate: %v", err)
	} else {
		r.res.ValidateOK = true
	}
	// --build-in-source: the makefile builds run in the repository (Go's
	// module and build caches apply) instead of a copy of it. --no-cached:
	// SAM's cache hashes the whole CodeUri (the repository, with the local
	// stack's data under .cache changing meanwhile).
	if _, err := r.command(nil, r.o.sam, "build", "--build-in-source", "--no-cached", "--template-file", r.o.template, "--build-dir", r.o.buildDir); err != nil {
		r.Fail("build: %v", err)
		return
	}
	r.res.BuildOK = true
	r.checkBootstraps()
}

// checkBootstraps checks that every function built has a bootstrap that is
// a statically linked aarch64 ELF executable, as provided.al2023 on arm64
// runs it.
func (r *runner) checkBootstraps() {
	paths, _ := filepath.Glob(filepath.Join(r.o.buildDir, "*", "bootstrap"))
	sort.Strings(paths)
	r.res.Bootstraps = map[string]int64{}
	if len(paths) == 0 {
		r.Fail("no bootstrap under %s", r.o.buildDir)
		return
	}
	ok := true
	for _, p := range paths {
		fn := filepath.Base(filepath.Dir(p))
		st, err := os.Stat(p)
		if err == nil {
			r.res.Bootstraps[fn] = st.Size()
			err = checkStaticARM64(p)
		}
		if err != nil {
			r.Fail("bootstrap of %s: %v", fn, err)
			ok = false
		}
	}
	r.res.BootstrapsARM64 = ok
}

// errNotStatic is returned by checkStaticARM64 for a dynamically linked
// executable.
var errNotStatic = errors.New("dynamically linked (has an interpreter or needs shared libraries)")

// checkStaticARM64 returns nil when path is an ELF executable for aarch64
// with no program interpreter and no shared library dependencies.
func checkStaticARM64(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("not an ELF file: %w", err)
	}
	defer f.Close()
	if f.Machine != elf.EM_AARCH64 {
		return fmt.Errorf("machine %v; want EM_AARCH64", f.Machine)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("ELF type %v; want an executable", f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errNotStatic
		}
	}
	if libs, err := f.ImportedLibraries(); err == nil && len(libs) > 0 {
		return fmt.Errorf("%w: %v", errNotStatic, libs)
	}
	return nil
}
