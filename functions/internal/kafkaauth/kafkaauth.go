// Package kafkaauth is how the consumer functions connect to Kafka (the
// worker's source, the Kafka Lambda's dead-letter topic), read from the
// environment: TLS with an optional CA, SASL/SCRAM or MSK IAM.
package kafkaauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/aws"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Config is how a consumer function connects to Kafka, read from the environment:
// SLUICE_KAFKA_TLS ("on": TLS 1.2 or later, the system's roots plus
// SLUICE_KAFKA_CA_FILE when set), SLUICE_KAFKA_SASL ("", scram-sha-256,
// scram-sha-512 or aws-msk-iam), SLUICE_KAFKA_USER and
// SLUICE_KAFKA_PASSWORD (SCRAM; inject the password from Secrets Manager,
// never as plain task environment). MSK IAM signs with the task role's
// credentials and needs TLS (MSK's IAM listener, port 9098).
type Config struct {
	TLS      bool
	CAFile   string
	SASL     string
	User     string
	Password string
}

// Load reads the configuration from getenv and checks it.
func Load(getenv func(string) string) (Config, error) {
	a := Config{CAFile: getenv("SLUICE_KAFKA_CA_FILE"), SASL: getenv("SLUICE_KAFKA_SASL"),
		User: getenv("SLUICE_KAFKA_USER"), Password: getenv("SLUICE_KAFKA_PASSWORD")}
	switch v := getenv("SLUICE_KAFKA_TLS"); v {
	case "", "off":
	case "on":
		a.TLS = true
	default:
		return a, fmt.Errorf("SLUICE_KAFKA_TLS=%q: want on or off", v)
	}
	if a.CAFile != "" && !a.TLS {
		return a, fmt.Errorf("SLUICE_KAFKA_CA_FILE needs SLUICE_KAFKA_TLS=on")
	}
	switch a.SASL {
	case "":
	case "scram-sha-256", "scram-sha-512":
		if a.User == "" || a.Password == "" {
			return a, fmt.Errorf("SLUICE_KAFKA_SASL=%s needs SLUICE_KAFKA_USER and SLUICE_KAFKA_PASSWORD", a.SASL)
		}
	case "aws-msk-iam":
		if !a.TLS {
			return a, fmt.Errorf("SLUICE_KAFKA_SASL=aws-msk-iam needs SLUICE_KAFKA_TLS=on (MSK's IAM listener is TLS only)")
		}
	default:
		return a, fmt.Errorf("SLUICE_KAFKA_SASL=%q: want scram-sha-256, scram-sha-512 or aws-msk-iam", a.SASL)
	}
	return a, nil
}

// Opts returns the franz-go options of a; creds signs MSK IAM
// authentication (the AWS SDK's credential chain).
func (a Config) Opts(creds awssdk.CredentialsProvider) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if a.TLS {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if a.CAFile != "" {
			pem, err := os.ReadFile(a.CAFile)
			if err != nil {
				return nil, fmt.Errorf("SLUICE_KAFKA_CA_FILE: %w", err)
			}
			pool, err := x509.SystemCertPool()
			if err != nil {
				pool = x509.NewCertPool()
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("SLUICE_KAFKA_CA_FILE %s: no PEM certificate", a.CAFile)
			}
			cfg.RootCAs = pool
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	switch a.SASL {
	case "scram-sha-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: a.User, Pass: a.Password}.AsSha256Mechanism()))
	case "scram-sha-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: a.User, Pass: a.Password}.AsSha512Mechanism()))
	case "aws-msk-iam":
		opts = append(opts, kgo.SASL(aws.ManagedStreamingIAM(func(ctx context.Context) (aws.Auth, error) {
			c, err := creds.Retrieve(ctx)
			if err != nil {
				return aws.Auth{}, fmt.Errorf("MSK IAM: AWS credentials: %w", err)
			}
			return aws.Auth{AccessKey: c.AccessKeyID, SecretKey: c.SecretAccessKey, SessionToken: c.SessionToken, UserAgent: "sluice"}, nil
		})))
	}
	return opts, nil
}
