package dsnsecret_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/sluice-dev/sluice/pkg/adapter/dsnsecret"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"dsn", "u:p@tcp(db:3306)/app", "u:p@tcp(db:3306)/app?parseTime=true"},
		{"dsn keeps options", "u:p@tcp(db:3306)/app?tls=true", "u:p@tcp(db:3306)/app?parseTime=true&tls=true"},
		{"rds document", `{"username":"u","password":"p@ss","host":"db.example","port":3307,"dbname":"app","engine":"mysql"}`, "u:p@ss@tcp(db.example:3307)/app?parseTime=true"},
		{"rds string port", `{"username":"u","password":"p","host":"db","port":"3306","dbname":"app"}`, "u:p@tcp(db:3306)/app?parseTime=true"},
		{"rds no port", `{"username":"u","password":"p","host":"db","dbname":"app"}`, "u:p@tcp(db:3306)/app?parseTime=true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dsnsecret.Parse(tt.in)
			if err != nil || got != tt.want {
				t.Errorf("Parse(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseRefusesWithoutQuoting(t *testing.T) {
	for _, in := range []string{"", "not a dsn with secret-pw", `{"password":"secret-pw"}`, `{"username":"u","password":"secret-pw","host":"h","port":99999}`} {
		_, err := dsnsecret.Parse(in)
		if !errors.Is(err, dsnsecret.ErrMalformed) {
			t.Errorf("Parse(%q) error = %v; want ErrMalformed", in, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret-pw") {
			t.Errorf("Parse(%q) error %q quotes the secret", in, err)
		}
	}
}

// fakeAPI records the secret ids it was asked for.
type fakeAPI struct {
	value string
	asked []string
}

func (f *fakeAPI) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	f.asked = append(f.asked, aws.ToString(in.SecretId))
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(f.value)}, nil
}

func TestRead(t *testing.T) {
	api := &fakeAPI{value: "u:p@tcp(db:3306)/app"}
	got, err := dsnsecret.Read(context.Background(), api, "arn:aws:secretsmanager:us-east-1:000000000000:secret:db-AbCdEf")
	if err != nil || got != "u:p@tcp(db:3306)/app?parseTime=true" {
		t.Fatalf("Read = %q, %v", got, err)
	}
	if len(api.asked) != 1 {
		t.Errorf("GetSecretValue calls = %d; want 1", len(api.asked))
	}
}
