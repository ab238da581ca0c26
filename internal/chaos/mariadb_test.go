package chaos_test

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/sluice-dev/sluice/internal/chaos"
	"github.com/sluice-dev/sluice/internal/e2e/controller/harness"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestPrivateMariaDB starts, stops and starts a private mariadbd: the
// shared one is never touched.
func TestPrivateMariaDB(t *testing.T) {
	if _, err := exec.LookPath("mariadb-install-db"); err != nil {
		if testenv.Required() {
			t.Fatal("mariadb-install-db not found (localstack/stack/up.sh mariadb installs it)")
		}
		t.Skip("mariadb-install-db not found")
	}
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sluice-chaos-mariadb-") // t.TempDir's parent is private to root
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	m, err := chaos.StartMariaDB(ctx, dir, port)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.Stop()
	if err := m.Start(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
}
