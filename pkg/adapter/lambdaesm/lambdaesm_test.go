package lambdaesm_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/lambdaesm"
)

// TestScalerOnMoto runs the scaler against moto_server's Lambda: a
// function, an SQS event source mapping with MaximumConcurrency 5, then
// read, set to 40, read back; a mapping that does not exist is ErrNotFound.
func TestScalerOnMoto(t *testing.T) {
	endpoint := testenv.AWSEndpoint(t)
	ctx := context.Background()
	client := lambda.New(lambda.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	uuid := mapping(t, ctx, client, endpoint, 5)
	s := lambdaesm.New(client)

	if n, err := s.MaximumConcurrency(ctx, uuid); err != nil || n != 5 {
		t.Fatalf("MaximumConcurrency(%s) = %d, %v; want 5", uuid, n, err)
	}
	if err := s.SetMaximumConcurrency(ctx, uuid, 40); err != nil {
		t.Fatalf("SetMaximumConcurrency(%s, 40) = %v", uuid, err)
	}
	if n, err := s.MaximumConcurrency(ctx, uuid); err != nil || n != 40 {
		t.Errorf("after the update: MaximumConcurrency = %d, %v; want 40", n, err)
	}
	if _, err := s.MaximumConcurrency(ctx, "00000000-0000-0000-0000-000000000000"); !errors.Is(err, lambdaesm.ErrNotFound) {
		t.Errorf("MaximumConcurrency(unknown) = %v; want ErrNotFound", err)
	}
}

// TestSetRefusesOutOfBounds: values AWS would refuse never reach the API.
func TestSetRefusesOutOfBounds(t *testing.T) {
	api := &recordingAPI{}
	s := lambdaesm.New(api)
	for _, n := range []int{0, 1, 1001, 5000} {
		if err := s.SetMaximumConcurrency(context.Background(), "u", n); err == nil {
			t.Errorf("SetMaximumConcurrency(%d) = nil; want an error", n)
		}
	}
	if api.updates != 0 {
		t.Errorf("%d UpdateEventSourceMapping calls; want none", api.updates)
	}
	if err := s.SetMaximumConcurrency(context.Background(), "u", 2); err != nil || api.updates != 1 || api.last != 2 {
		t.Errorf("SetMaximumConcurrency(2) = %v with %d calls (last %d); want one call with 2", err, api.updates, api.last)
	}
}

// recordingAPI is a Lambda API that records the updates and has no
// mappings.
type recordingAPI struct {
	updates int
	last    int32
}

func (r *recordingAPI) GetEventSourceMapping(context.Context, *lambda.GetEventSourceMappingInput, ...func(*lambda.Options)) (*lambda.GetEventSourceMappingOutput, error) {
	return nil, &types.ResourceNotFoundException{Message: aws.String("no mapping")}
}

func (r *recordingAPI) UpdateEventSourceMapping(_ context.Context, in *lambda.UpdateEventSourceMappingInput, _ ...func(*lambda.Options)) (*lambda.UpdateEventSourceMappingOutput, error) {
	r.updates++
	r.last = *in.ScalingConfig.MaximumConcurrency
	return &lambda.UpdateEventSourceMappingOutput{}, nil
}

// mapping creates, on moto_server, an SQS queue, a role, a function and
// the queue's event source mapping with MaximumConcurrency n, deleted at
// the end of the test, and returns the mapping's UUID.
func mapping(t *testing.T, ctx context.Context, client *lambda.Client, endpoint string, n int32) string {
	t.Helper()
	name := fmt.Sprintf("sluice-esm-test-%d", time.Now().UnixNano())
	created := queryAPI(t, endpoint, "sqs", url.Values{"Action": {"CreateQueue"}, "QueueName": {name}})
	// The queue's URL names the emulator's account: .../<account>/<name>.
	m := regexp.MustCompile(`/(\d{12})/` + name).FindStringSubmatch(created)
	if m == nil {
		t.Fatalf("CreateQueue answered %q; want the queue's URL", created)
	}
	account := m[1]
	queueARN := fmt.Sprintf("arn:aws:sqs:us-east-1:%s:%s", account, name)
	t.Cleanup(func() {
		_ = queryAPI(t, endpoint, "sqs", url.Values{"Action": {"DeleteQueue"}, "QueueUrl": {endpoint + "/" + account + "/" + name}})
	})
	_ = queryAPI(t, endpoint, "iam", url.Values{"Action": {"CreateRole"}, "Version": {"2010-05-08"}, "RoleName": {name},
		"AssumeRolePolicyDocument": {`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"lambda.amazonaws.com"},"Action":"sts:AssumeRole"}]}`}})
	t.Cleanup(func() {
		_ = queryAPI(t, endpoint, "iam", url.Values{"Action": {"DeleteRole"}, "Version": {"2010-05-08"}, "RoleName": {name}})
	})
	fn, err := client.CreateFunction(ctx, &lambda.CreateFunctionInput{
		FunctionName: aws.String(name), Runtime: types.RuntimeProvidedal2023, Handler: aws.String("bootstrap"),
		Role: aws.String(fmt.Sprintf("arn:aws:iam::%s:role/%s", account, name)), Code: &types.FunctionCode{ZipFile: bootstrapZip(t)},
	})
	if err != nil {
		t.Fatalf("create function: %v", err)
	}
	t.Cleanup(func() { _, _ = client.DeleteFunction(ctx, &lambda.DeleteFunctionInput{FunctionName: fn.FunctionName}) })
	esm, err := client.CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{
		FunctionName: fn.FunctionName, EventSourceArn: aws.String(queueARN), BatchSize: aws.Int32(10),
		ScalingConfig: &types.ScalingConfig{MaximumConcurrency: aws.Int32(n)},
	})
	if err != nil {
		t.Fatalf("create event source mapping: %v", err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteEventSourceMapping(ctx, &lambda.DeleteEventSourceMappingInput{UUID: esm.UUID})
	})
	return *esm.UUID
}

// queryAPI calls an AWS query-protocol action on moto_server, which routes
// by the credential scope's service and does not check signatures, and
// returns the response's body.
func queryAPI(t *testing.T, endpoint, service string, form url.Values) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, endpoint+"/", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/"+service+"/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", service, form.Get("Action"), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: HTTP %d %s, %v", service, form.Get("Action"), resp.StatusCode, body, err)
	}
	return string(body)
}

// bootstrapZip is a deployment package with an empty bootstrap: moto
// stores it, nothing runs it.
func bootstrapZip(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	if _, err := z.Create("bootstrap"); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
