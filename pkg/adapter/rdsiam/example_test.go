package rdsiam_test

import (
	"context"
	"fmt"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/go-sql-driver/mysql"

	"github.com/sluice-dev/sluice/pkg/adapter/rdsiam"
)

// A consumer's pool logs in with a token per new connection; the token
// is a presigned rds-db:connect request for the user, valid 15 minutes.
func ExampleTokens_Apply() {
	tokens := &rdsiam.Tokens{Endpoint: "orders.cluster-abc.eu-west-1.rds.amazonaws.com:3306", Region: "eu-west-1",
		User: "sluice_iam", Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")}
	cfg, _ := mysql.ParseDSN("sluice_iam@tcp(orders.cluster-abc.eu-west-1.rds.amazonaws.com:3306)/orders?tls=true")
	fmt.Println(tokens.Apply(cfg), cfg.AllowCleartextPasswords) // then mysql.NewConnector(cfg) and sql.OpenDB

	tok, _ := tokens.Token(context.Background())
	u, _ := url.Parse("https://" + tok)
	fmt.Println(u.Query().Get("Action"), u.Query().Get("DBUser"), u.Query().Get("X-Amz-Expires"))

	plain, _ := mysql.ParseDSN("sluice_iam@tcp(db:3306)/orders")
	fmt.Println(tokens.Apply(plain) == rdsiam.ErrNoTLS)
	// Output:
	// <nil> true
	// connect sluice_iam 900
	// true
}
