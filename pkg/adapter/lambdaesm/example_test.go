package lambdaesm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/sluice-dev/sluice/pkg/adapter/lambdaesm"
)

// lambdaAPI answers the Lambda REST API's GetEventSourceMapping and
// UpdateEventSourceMapping for one mapping, in memory.
func lambdaAPI(uuid string, concurrency int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/2015-03-31/event-source-mappings/"+uuid {
			w.Header().Set("X-Amzn-Errortype", "ResourceNotFoundException")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"Message":"The resource you requested does not exist."}`)
			return
		}
		if r.Method == http.MethodPut {
			var in struct {
				ScalingConfig struct{ MaximumConcurrency int }
			}
			_ = json.NewDecoder(r.Body).Decode(&in)
			concurrency = in.ScalingConfig.MaximumConcurrency
		}
		fmt.Fprintf(w, `{"UUID":%q,"State":"Enabled","ScalingConfig":{"MaximumConcurrency":%d}}`, uuid, concurrency)
	})
}

func Example() {
	srv := httptest.NewServer(lambdaAPI("4f3e2d1c", 10))
	defer srv.Close()
	// In a Lambda: lambda.NewFromConfig(cfg) with awsconf.Load's cfg.
	client := lambda.New(lambda.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("id", "secret", "")})
	s := lambdaesm.New(client)

	ctx := context.Background()
	n, _ := s.MaximumConcurrency(ctx, "4f3e2d1c")
	fmt.Println("MaximumConcurrency", n)
	if err := s.SetMaximumConcurrency(ctx, "4f3e2d1c", 25); err != nil {
		fmt.Println(err)
	}
	n, _ = s.MaximumConcurrency(ctx, "4f3e2d1c")
	fmt.Println("MaximumConcurrency", n)
	err := s.SetMaximumConcurrency(ctx, "4f3e2d1c", 5000)
	fmt.Println(err)
	_, err = s.MaximumConcurrency(ctx, "gone")
	fmt.Println(errors.Is(err, lambdaesm.ErrNotFound))
	// Output:
	// MaximumConcurrency 10
	// MaximumConcurrency 25
	// lambda event source mapping 4f3e2d1c: MaximumConcurrency 5000 is outside 2..1000
	// true
}
