package testfile_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-dev/sluice/internal/testfile"
)

func TestJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "event.json")
	if err := os.WriteFile(path, []byte(`{"source":"aws.events","n":3}`), 0o600); err != nil {
		t.Fatal(err)
	}
	type event struct {
		Source string `json:"source"`
		N      int    `json:"n"`
	}
	if got := testfile.JSON[event](t, path); got != (event{Source: "aws.events", N: 3}) {
		t.Errorf("JSON = %+v; want source aws.events, n 3", got)
	}
	if got := string(testfile.Read(t, path)); got != `{"source":"aws.events","n":3}` {
		t.Errorf("Read = %q; want the file's content", got)
	}
}
