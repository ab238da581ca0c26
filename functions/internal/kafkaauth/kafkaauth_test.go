package kafkaauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestLoadKafkaAuth(t *testing.T) {
	tests := []struct {
		env     map[string]string
		wantErr string
	}{
		{map[string]string{}, ""},
		{map[string]string{"SLUICE_KAFKA_TLS": "on", "SLUICE_KAFKA_SASL": "aws-msk-iam"}, ""},
		{map[string]string{"SLUICE_KAFKA_SASL": "scram-sha-512", "SLUICE_KAFKA_USER": "u", "SLUICE_KAFKA_PASSWORD": "p"}, ""},
		{map[string]string{"SLUICE_KAFKA_TLS": "yes"}, "want on or off"},
		{map[string]string{"SLUICE_KAFKA_SASL": "aws-msk-iam"}, "needs SLUICE_KAFKA_TLS=on"},
		{map[string]string{"SLUICE_KAFKA_SASL": "scram-sha-256", "SLUICE_KAFKA_USER": "u"}, "SLUICE_KAFKA_PASSWORD"},
		{map[string]string{"SLUICE_KAFKA_SASL": "plain"}, "want scram-sha-256"},
		{map[string]string{"SLUICE_KAFKA_CA_FILE": "/ca.pem"}, "needs SLUICE_KAFKA_TLS=on"},
	}
	for _, tt := range tests {
		_, err := Load(func(k string) string { return tt.env[k] })
		if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("Load(%v) = %v; want error containing %q", tt.env, err, tt.wantErr)
		}
	}
}

// selfSigned returns a TLS certificate for 127.0.0.1 and its PEM file.
func selfSigned(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kfake"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, file
}

// ping connects with auth's options to the cluster and returns the error.
func ping(t *testing.T, c *kfake.Cluster, a Config) error {
	t.Helper()
	opts, err := a.Opts(credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(c.ListenAddrs()...), kgo.RequestRetries(0))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return cl.Ping(ctx)
}

// TestKafkaAuthTLSAndSCRAM: against a broker with TLS and SCRAM, the right
// CA and credentials connect; a wrong password or no TLS do not.
func TestKafkaAuthTLSAndSCRAM(t *testing.T) {
	cert, caFile := selfSigned(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "sluice", "correct-horse"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	good := Config{TLS: true, CAFile: caFile, SASL: "scram-sha-256", User: "sluice", Password: "correct-horse"}
	if err := ping(t, c, good); err != nil {
		t.Errorf("TLS + SCRAM with the right CA and password: %v; want connected", err)
	}
	bad := good
	bad.Password = "wrong"
	if err := ping(t, c, bad); err == nil {
		t.Errorf("wrong password: connected; want refused")
	}
	plain := good
	plain.TLS, plain.CAFile = false, ""
	if err := ping(t, c, plain); err == nil {
		t.Errorf("no TLS against a TLS listener: connected; want a failure")
	}
}
