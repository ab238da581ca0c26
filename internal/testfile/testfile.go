// Package testfile reads a test's fixture files (testdata/...), failing the
// test when a fixture is missing or malformed.
package testfile

import (
	"encoding/json"
	"os"
	"testing"
)

// Read returns the content of the file at path.
func Read(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// JSON decodes the JSON file at path into a T.
func JSON[T any](t testing.TB, path string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(Read(t, path), &v); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	return v
}
