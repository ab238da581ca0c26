package localaws

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// CreateMapping creates on a local endpoint (moto_server) what an SQS event
// source mapping is there: an SQS queue named name (the mapping's event
// source; moto refuses a mapping on a queue it does not hold, so with SQS
// on another server this queue only names it), a role, a function with an
// empty deployment package (nothing runs it there: the RIE runs the real
// bootstrap) and the mapping, with MaximumConcurrency n. It returns the
// mapping's UUID and a function that deletes what it created. A Fleet with
// MappingConcurrency then follows the mapping, and whatever sets it
// (lambdaesm, the controller, `aws lambda update-event-source-mapping`)
// scales the local stand-in.
func CreateMapping(ctx context.Context, endpoint string, api *lambda.Client, name string, n int) (string, func(), error) {
	var undo []func()
	cleanup := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	created, err := queryAPI(ctx, endpoint, "sqs", url.Values{"Action": {"CreateQueue"}, "QueueName": {name}})
	if err != nil {
		return "", cleanup, err
	}
	m := regexp.MustCompile(`/(\d{12})/` + regexp.QuoteMeta(name)).FindStringSubmatch(created)
	if m == nil {
		return "", cleanup, fmt.Errorf("CreateQueue %s answered %q; want the queue's URL", name, created)
	}
	account := m[1]
	undo = append(undo, func() {
		queryAPI(context.Background(), endpoint, "sqs", url.Values{"Action": {"DeleteQueue"}, "QueueUrl": {endpoint + "/" + account + "/" + name}})
	})
	if _, err := queryAPI(ctx, endpoint, "iam", url.Values{"Action": {"CreateRole"}, "Version": {"2010-05-08"}, "RoleName": {name},
		"AssumeRolePolicyDocument": {`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"lambda.amazonaws.com"},"Action":"sts:AssumeRole"}]}`}}); err != nil {
		return "", cleanup, err
	}
	undo = append(undo, func() {
		queryAPI(context.Background(), endpoint, "iam", url.Values{"Action": {"DeleteRole"}, "Version": {"2010-05-08"}, "RoleName": {name}})
	})
	zipped, err := emptyBootstrap()
	if err != nil {
		return "", cleanup, err
	}
	fn, err := api.CreateFunction(ctx, &lambda.CreateFunctionInput{
		FunctionName: aws.String(name), Runtime: types.RuntimeProvidedal2023, Handler: aws.String("bootstrap"),
		Role: aws.String(fmt.Sprintf("arn:aws:iam::%s:role/%s", account, name)), Code: &types.FunctionCode{ZipFile: zipped},
	})
	if err != nil {
		return "", cleanup, fmt.Errorf("create function %s: %w", name, err)
	}
	undo = append(undo, func() {
		api.DeleteFunction(context.Background(), &lambda.DeleteFunctionInput{FunctionName: fn.FunctionName})
	})
	esm, err := api.CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{
		FunctionName: fn.FunctionName, EventSourceArn: aws.String(fmt.Sprintf("arn:aws:sqs:%s:%s:%s", DefaultRegion, account, name)),
		BatchSize: aws.Int32(10), ScalingConfig: &types.ScalingConfig{MaximumConcurrency: aws.Int32(int32(n))},
	})
	if err != nil {
		return "", cleanup, fmt.Errorf("create event source mapping for %s: %w", name, err)
	}
	undo = append(undo, func() {
		api.DeleteEventSourceMapping(context.Background(), &lambda.DeleteEventSourceMappingInput{UUID: esm.UUID})
	})
	return aws.ToString(esm.UUID), cleanup, nil
}

// queryAPI calls an AWS query-protocol action on moto_server, which routes
// by the credential scope's service and does not check signatures.
func queryAPI(ctx context.Context, endpoint, service string, form url.Values) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+"/", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=test/20260101/"+DefaultRegion+"/"+service+"/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", service, form.Get("Action"), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s %s: HTTP %d %s, %v", service, form.Get("Action"), resp.StatusCode, body, err)
	}
	return string(body), nil
}

// emptyBootstrap is a deployment package with an empty bootstrap.
func emptyBootstrap() ([]byte, error) {
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	if _, err := z.Create("bootstrap"); err != nil {
		return nil, err
	}
	if err := z.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
