package mysqltest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TLSServer is a private mariadbd that requires TLS
// (require_secure_transport), on a certificate signed by a CA the test
// made.
type TLSServer struct {
	Addr    string // 127.0.0.1:PORT
	CA      string // the PEM file of the CA that signed the server's certificate
	WrongCA string // the PEM file of another CA
	Socket  string // the server's unix socket (root authenticates there by the process's user)
	Admin   Admin  // root over the server's socket
}

// ErrNoMariaDB is wrapped by StartTLS's error when this machine has no
// mariadbd, mariadb-install-db, mariadb client or user mysql.
var ErrNoMariaDB = errors.New("MariaDB server not installed")

// StartTLSServer initialises a data directory, makes a CA and a server
// certificate for 127.0.0.1, and starts mariadbd with them on a free port;
// the server is stopped when the test ends. It skips the test when
// mariadbd or mariadb-install-db is absent.
func StartTLSServer(t testing.TB) *TLSServer {
	t.Helper()
	s, stop, err := StartTLS()
	if errors.Is(err, ErrNoMariaDB) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return s
}

// StartTLS is StartTLSServer outside a test (an end-to-end run, a
// benchmark): it returns the server and the function that stops it and
// removes its data directory. args are more mariadbd options (a larger
// --innodb-buffer-pool-size, say), after the defaults.
func StartTLS(args ...string) (*TLSServer, func(), error) {
	for _, bin := range []string{"/usr/sbin/mariadbd", "mariadb-install-db", "mariadb", "mariadb-admin"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, nil, fmt.Errorf("%w: %s: %v", ErrNoMariaDB, bin, err)
		}
	}
	dir, err := os.MkdirTemp("", "sluice-tls-mariadb-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	if err := certificates(dir); err != nil {
		cleanup()
		return nil, nil, err
	}
	cmd, addr, err := startMariaDB(dir, args)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	stopAll := func() { stop(cmd); cleanup() }
	s := &TLSServer{Addr: addr, CA: filepath.Join(dir, "ca.pem"), WrongCA: filepath.Join(dir, "wrong-ca.pem"),
		Socket: filepath.Join(dir, "mysqld.sock")}
	s.Admin = SocketAdmin(s.Socket)
	return s, stopAll, nil
}

// certificates writes into dir the CA (ca.pem), another CA
// (wrong-ca.pem) and the server's certificate and key for 127.0.0.1.
func certificates(dir string) error {
	ca, caKey, err := newCA(dir, "ca.pem", "sluice test CA")
	if err != nil {
		return err
	}
	if _, _, err := newCA(dir, "wrong-ca.pem", "another CA"); err != nil {
		return err
	}
	return serverCert(dir, ca, caKey)
}

// startMariaDB initialises dir/data and starts mariadbd on a free port
// with dir's certificates and require_secure_transport, and waits until it
// answers on its socket.
func startMariaDB(dir string, extra []string) (*exec.Cmd, string, error) {
	data := filepath.Join(dir, "data")
	if err := chown(dir); err != nil {
		return nil, "", err
	}
	if out, err := exec.Command("mariadb-install-db", "--no-defaults", "--user=mysql", "--datadir="+data, "--skip-test-db").CombinedOutput(); err != nil {
		return nil, "", fmt.Errorf("mariadb-install-db: %v: %s", err, out)
	}
	if err := chown(dir); err != nil {
		return nil, "", err
	}
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	sock := filepath.Join(dir, "mysqld.sock")
	args := append([]string{"--no-defaults", "--user=mysql", "--datadir=" + data, "--port=" + strconv.Itoa(port),
		"--bind-address=127.0.0.1", "--socket=" + sock, "--skip-name-resolve", "--skip-log-bin", "--innodb-buffer-pool-size=32M",
		"--ssl-ca=" + filepath.Join(dir, "ca.pem"), "--ssl-cert=" + filepath.Join(dir, "server.pem"), "--ssl-key=" + filepath.Join(dir, "server-key.pem"),
		"--require-secure-transport=ON", "--log-error=" + filepath.Join(dir, "error.log")}, extra...)
	cmd := exec.Command("/usr/sbin/mariadbd", args...)
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start mariadbd: %w", err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if exec.Command("mariadb-admin", "--no-defaults", "--socket="+sock, "-uroot", "ping").Run() == nil {
			return cmd, fmt.Sprintf("127.0.0.1:%d", port), nil
		}
		if time.Now().After(deadline) {
			stop(cmd)
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			return nil, "", fmt.Errorf("mariadbd with TLS did not answer in 60 s: %s", log)
		}
	}
}

// stop shuts mariadbd down (SIGTERM), killing it after 30 s.
func stop(cmd *exec.Cmd) {
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// chown gives dir to the user mysql, which mariadbd runs as.
func chown(dir string) error {
	u, err := user.Lookup("mysql")
	if err != nil {
		return fmt.Errorf("%w: user mysql: %v", ErrNoMariaDB, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	os.Chmod(dir, 0o755)
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			err = os.Chown(p, uid, gid)
		}
		return err
	})
}

func newCA(dir, file, name string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	if err := writePEM(filepath.Join(dir, file), "CERTIFICATE", der); err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func serverCert(dir string, ca *x509.Certificate, caKey *ecdsa.PrivateKey) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, "server.pem"), "CERTIFICATE", der); err != nil {
		return err
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, "server-key.pem"), "PRIVATE KEY", kb)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o644)
}
