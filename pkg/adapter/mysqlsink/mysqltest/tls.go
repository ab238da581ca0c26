package mysqltest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
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
	Admin   Admin  // root over the server's socket
}

// StartTLSServer initialises a data directory, makes a CA and a server
// certificate for 127.0.0.1, and starts mariadbd with them on a free port;
// the server is stopped when the test ends. It skips the test when
// mariadbd or mariadb-install-db is absent.
func StartTLSServer(t testing.TB) *TLSServer {
	t.Helper()
	for _, bin := range []string{"/usr/sbin/mariadbd", "mariadb-install-db", "mariadb"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not found: %v", bin, err)
		}
	}
	dir, err := os.MkdirTemp("", "sluice-tls-mariadb-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ca, caKey := newCA(t, dir, "ca.pem", "sluice test CA")
	newCA(t, dir, "wrong-ca.pem", "another CA")
	serverCert(t, dir, ca, caKey)
	data := filepath.Join(dir, "data")
	chown(t, dir)
	if out, err := exec.Command("mariadb-install-db", "--no-defaults", "--user=mysql", "--datadir="+data, "--skip-test-db").CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v: %s", err, out)
	}
	chown(t, dir)
	port := freePort(t)
	sock := filepath.Join(dir, "mysqld.sock")
	cmd := exec.Command("/usr/sbin/mariadbd", "--no-defaults", "--user=mysql", "--datadir="+data, "--port="+strconv.Itoa(port),
		"--bind-address=127.0.0.1", "--socket="+sock, "--skip-name-resolve", "--skip-log-bin", "--innodb-buffer-pool-size=32M",
		"--ssl-ca="+filepath.Join(dir, "ca.pem"), "--ssl-cert="+filepath.Join(dir, "server.pem"), "--ssl-key="+filepath.Join(dir, "server-key.pem"),
		"--require-secure-transport=ON", "--log-error="+filepath.Join(dir, "error.log"))
	if err := cmd.Start(); err != nil {
		t.Fatalf("start mariadbd: %v", err)
	}
	t.Cleanup(func() { stop(cmd) })
	s := &TLSServer{Addr: fmt.Sprintf("127.0.0.1:%d", port), CA: filepath.Join(dir, "ca.pem"), WrongCA: filepath.Join(dir, "wrong-ca.pem")}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if exec.Command("mariadb-admin", "--no-defaults", "--socket="+sock, "-uroot", "ping").Run() == nil {
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("mariadbd with TLS did not answer in 60 s: %s", log)
		}
	}
	s.Admin = RootSocket(t, sock)
	return s
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

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// chown gives dir to the user mysql, which mariadbd runs as.
func chown(t testing.TB, dir string) {
	u, err := user.Lookup("mysql")
	if err != nil {
		t.Skipf("user mysql (install mariadb-server): %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	os.Chmod(dir, 0o755)
	filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			err = os.Chown(p, uid, gid)
		}
		return err
	})
}

func newCA(t testing.TB, dir, file, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, file), "CERTIFICATE", der)
	cert, _ := x509.ParseCertificate(der)
	return cert, key
}

func serverCert(t testing.TB, dir string, ca *x509.Certificate, caKey *ecdsa.PrivateKey) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "server.pem"), "CERTIFICATE", der)
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "server-key.pem"), "PRIVATE KEY", kb)
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
}
