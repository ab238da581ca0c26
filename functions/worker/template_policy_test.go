package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// The consumers' deployment as template.yaml declares it for every path
// (the SQS Lambda, the Kafka Lambda, the worker's task), read from the
// template itself with the helpers of template_test.go.

// consumerRoles are the roles of the three consumer paths.
var consumerRoles = []string{"SqsConsumerRole", "KafkaConsumerRole", "WorkerTaskRole"}

// statement returns the lines of the policy statement sid of role (from
// its "Sid:" line to the next statement at the same indentation).
func statement(t *testing.T, role, sid string) []string {
	t.Helper()
	lines := block(t, template(t), "Resources", role, "Properties", "Policies")
	for i, l := range lines {
		if strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(l), "- ")) != "Sid: "+sid {
			continue
		}
		in := len(l) - len(strings.TrimLeft(l, " -"))
		for j := i + 1; j < len(lines); j++ {
			tr := strings.TrimLeft(lines[j], " ")
			if tr != "" && !strings.HasPrefix(tr, "#") && len(lines[j])-len(tr) < in {
				return lines[i:j]
			}
		}
		return lines[i:]
	}
	t.Fatalf("%s has no statement %s", role, sid)
	return nil
}

// listAfter returns the items of the YAML list under key in lines.
func listAfter(t *testing.T, lines []string, key string) []string {
	t.Helper()
	for i, l := range lines {
		if strings.TrimSpace(strings.TrimLeft(l, " -")) != key+":" {
			continue
		}
		var items []string
		for _, m := range lines[i+1:] {
			v, ok := strings.CutPrefix(strings.TrimSpace(m), "- ")
			if !ok {
				break
			}
			items = append(items, strings.Trim(strings.TrimSpace(v), `"`))
		}
		return items
	}
	t.Fatalf("no %s in %q", key, lines)
	return nil
}

// iamLike reports whether s matches the IAM StringLike pattern p (* any
// run of characters, ? one character).
func iamLike(p, s string) bool {
	re := "^" + strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(p)) + "$"
	return regexp.MustCompile(re).MatchString(s)
}

// keyRecorder is a DynamoDB stand-in that records the partition keys the
// store reads and writes.
type keyRecorder struct {
	ddbstore.API
	gets, puts []string
}

func (k *keyRecorder) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	k.gets = append(k.gets, in.Key["pk"].(*types.AttributeValueMemberS).Value)
	return &dynamodb.GetItemOutput{}, nil
}

func (k *keyRecorder) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	k.puts = append(k.puts, in.Item["pk"].(*types.AttributeValueMemberS).Value)
	return &dynamodb.PutItemOutput{}, nil
}

// TestTemplateConsumerWritesOnlyTheirLeases: each consumer role may write
// (PutItem, its only write) the items whose partition key its loop's
// leases have, and read (GetItem) its loop's items only; the keys the
// store really uses pass those conditions and another loop's, or the
// loop's RATE, do not.
func TestTemplateConsumerWritesOnlyTheirLeases(t *testing.T) {
	const loop = "orders"
	rec := &keyRecorder{}
	st := ddbstore.New(rec, "sluice")
	now := time.Now()
	if err := st.ReportPeer(context.Background(), protocol.Peer{Loop: loop, Instance: "i-1", StartedAt: now, ReportedAt: now, ExpiresAt: now.Add(15 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	st.ReadRate(context.Background(), loop)
	if len(rec.puts) == 0 || len(rec.gets) == 0 {
		t.Fatalf("the store wrote %q and read %q; want the lease and RATE", rec.puts, rec.gets)
	}
	for _, role := range consumerRoles {
		policy := strings.Join(block(t, template(t), "Resources", role, "Properties", "Policies"), "\n")
		for _, action := range []string{"dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem", "dynamodb:TransactWriteItems"} {
			if strings.Contains(policy, action) {
				t.Errorf("%s grants %s; a consumer writes its lease with PutItem only", role, action)
			}
		}
		if n := strings.Count(policy, "dynamodb:PutItem"); n != 1 {
			t.Errorf("%s names dynamodb:PutItem %d times; want once, in Lease", role, n)
		}
		if n := strings.Count(policy, "dynamodb:GetItem"); n != 1 {
			t.Errorf("%s names dynamodb:GetItem %d times; want once, in ReadRate", role, n)
		}
		lease := statement(t, role, "Lease")
		if got := listAfter(t, lease, "Action"); len(got) != 1 || got[0] != "dynamodb:PutItem" {
			t.Errorf("%s Lease allows %q; want dynamodb:PutItem alone", role, got)
		}
		put := listAfter(t, lease, "dynamodb:LeadingKeys")
		if !strings.Contains(strings.Join(lease, "\n"), "ForAllValues:StringLike:") || len(put) != 1 {
			t.Fatalf("%s Lease: no ForAllValues:StringLike on one dynamodb:LeadingKeys pattern: %q", role, lease)
		}
		pattern := strings.ReplaceAll(strings.Trim(strings.TrimPrefix(put[0], "!Sub "), `"`), "${LoopId}", loop)
		cases := map[string]bool{"billing#i-1": false, loop: false, "orders2#i-1": false}
		for _, pk := range rec.puts {
			cases[pk] = true
		}
		for pk, want := range cases {
			if iamLike(pattern, pk) != want {
				t.Errorf("%s Lease's LeadingKeys %q on pk %q: allowed %v; want %v", role, pattern, pk, !want, want)
			}
		}
		read := statement(t, role, "ReadRate")
		keys := listAfter(t, read, "dynamodb:LeadingKeys")
		if !strings.Contains(strings.Join(read, "\n"), "ForAllValues:StringEquals:") || len(keys) != 1 || keys[0] != "!Ref LoopId" {
			t.Errorf("%s ReadRate: want ForAllValues:StringEquals dynamodb:LeadingKeys [!Ref LoopId]; got %q", role, read)
		}
		for _, pk := range rec.gets {
			if pk != loop {
				t.Errorf("the store reads at pk %q; the policy allows %q", pk, loop)
			}
		}
	}
	if p := value(t, block(t, template(t), "Parameters", "LoopId"), "AllowedPattern"); regexp.MustCompile(p).MatchString("orders*") {
		t.Errorf("LoopId's AllowedPattern %q admits a wildcard, which would widen the LeadingKeys patterns", p)
	}
}

// mysqlParams are the MySQL connection's variables, as every consumer
// path reads them, and the template parameters that set them.
var mysqlParams = map[string]string{
	"SLUICE_MYSQL_HOST": "ConsumerMySQLHost", "SLUICE_MYSQL_PORT": "ConsumerMySQLPort", "SLUICE_MYSQL_DATABASE": "ConsumerMySQLDatabase",
	"SLUICE_MYSQL_CA": "ConsumerMySQLCA", "SLUICE_MYSQL_TLS": "ConsumerMySQLTLS",
	"SLUICE_MYSQL_MAX_OPEN": "ConsumerMySQLMaxOpen", "SLUICE_MYSQL_MAX_IDLE": "ConsumerMySQLMaxIdle",
	"SLUICE_MYSQL_CONN_LIFETIME": "ConsumerMySQLConnLifetime", "SLUICE_MYSQL_AUTH": "ConsumerMySQLAuth",
	"SLUICE_MYSQL_USER": "ConsumerMySQLUser",
}

// allowed returns a parameter's AllowedValues (inline list) or nil.
func allowed(lines []string) []string {
	for _, l := range lines {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "AllowedValues:"); ok {
			var out []string
			for _, x := range strings.Split(strings.Trim(strings.TrimSpace(v), "[]"), ",") {
				out = append(out, strings.Trim(strings.TrimSpace(x), `"`))
			}
			return out
		}
	}
	return nil
}

// TestTemplateMySQLConnectionOnEveryPath: each MySQL setting reaches the
// SQS Lambda, the Kafka Lambda and the worker from its parameter, and
// every value the parameter admits is one the code accepts.
func TestTemplateMySQLConnectionOnEveryPath(t *testing.T) {
	text := template(t)
	sqsEnv := strings.Join(block(t, text, "Resources", "SqsConsumerFunction", "Properties", "Environment", "Variables"), "\n")
	kafkaEnv := strings.Join(block(t, text, "Resources", "KafkaConsumerFunction", "Properties", "Environment", "Variables"), "\n")
	worker := strings.Join(container(t), "\n")
	for env, param := range mysqlParams {
		if !strings.Contains(sqsEnv, env+": !Ref "+param+"\n") || !strings.Contains(kafkaEnv, env+": !Ref "+param+"\n") {
			t.Errorf("a consumer Lambda does not set %s from %s", env, param)
		}
		if !strings.Contains(worker, "{Name: "+env+", Value: !Ref "+param+"}") {
			t.Errorf("the worker does not set %s from %s", env, param)
		}
	}
	samples := map[string]map[string]bool{
		"ConsumerMySQLMaxOpen":      {"": true, "1": true, "8": true, "99": true, "0": false, "100": false, "-1": false},
		"ConsumerMySQLMaxIdle":      {"": true, "4": true, "0": false},
		"ConsumerMySQLConnLifetime": {"": true, "90s": true, "5m": true, "1h": true, "0s": false, "5 minutes": false, "5": false},
	}
	conn := map[string]string{"ConsumerMySQLMaxOpen": "SLUICE_MYSQL_MAX_OPEN", "ConsumerMySQLMaxIdle": "SLUICE_MYSQL_MAX_IDLE", "ConsumerMySQLConnLifetime": "SLUICE_MYSQL_CONN_LIFETIME"}
	for param, cases := range samples {
		re := regexp.MustCompile(value(t, block(t, text, "Parameters", param), "AllowedPattern"))
		for in, want := range cases {
			if re.MatchString(in) != want {
				t.Errorf("%s admits %q: %v; want %v", param, in, !want, want)
			}
			if _, err := mysqlsink.ConnFromEnv(func(k string) string { return map[string]string{conn[param]: in}[k] }, mysqlsink.LambdaConn()); want && err != nil {
				t.Errorf("%s admits %q, which the consumers refuse: %v", param, in, err)
			}
		}
	}
	modes := allowed(block(t, text, "Parameters", "ConsumerMySQLTLS"))
	if len(modes) < 2 {
		t.Fatalf("ConsumerMySQLTLS AllowedValues %q", modes)
	}
	for _, m := range modes {
		if _, err := mysqlsink.ConnFromEnv(func(k string) string { return map[string]string{"SLUICE_MYSQL_TLS": m}[k] }, mysqlsink.LambdaConn()); err != nil {
			t.Errorf("ConsumerMySQLTLS admits %q, which the consumers refuse: %v", m, err)
		}
	}
	if got := allowed(block(t, text, "Parameters", "ConsumerMySQLAuth")); strings.Join(got, ",") != "password,iam" {
		t.Errorf("ConsumerMySQLAuth AllowedValues %q; want password, iam", got)
	}
}

// TestTemplateIAMDatabaseAuth: with ConsumerMySQLAuth iam each consumer
// role may rds-db:connect as the user ConsumerMySQLDBUserArn names, and
// only then; the parameter takes RDS's dbuser ARNs (an instance, a cluster,
// a proxy) and nothing else.
func TestTemplateIAMDatabaseAuth(t *testing.T) {
	text := template(t)
	for _, role := range consumerRoles {
		policy := block(t, text, "Resources", role, "Properties", "Policies")
		st := strings.Join(statement(t, role, "ConnectAsDatabaseUser"), "\n")
		if !strings.Contains(st, "- rds-db:connect\n") || !strings.Contains(st, "Resource: !Ref ConsumerMySQLDBUserArn") {
			t.Errorf("%s ConnectAsDatabaseUser: %q", role, st)
		}
		for i, l := range policy {
			if strings.Contains(l, "Sid: ConnectAsDatabaseUser") && (i == 0 || strings.TrimSpace(policy[i-1]) != "- IsMySQLIAM") {
				t.Errorf("%s grants rds-db:connect outside the condition IsMySQLIAM", role)
			}
		}
	}
	cond := strings.Join(block(t, text, "Conditions", "IsMySQLIAM"), "\n")
	if !strings.Contains(cond, "!Equals [!Ref ConsumerMySQLAuth, iam]") {
		t.Errorf("IsMySQLIAM does not test ConsumerMySQLAuth: %q", cond)
	}
	re := regexp.MustCompile(value(t, block(t, text, "Parameters", "ConsumerMySQLDBUserArn"), "AllowedPattern"))
	for in, want := range map[string]bool{
		"": true,
		"arn:aws:rds-db:eu-west-1:123456789012:dbuser:db-ABCDEFGHIJKLMNOPQRSTU12345/sluice_rw":  true,
		"arn:aws:rds-db:eu-west-1:123456789012:dbuser:cluster-ABCDEFGHIJKLMNOPQRSTU1/sluice_rw": true,
		"arn:aws:rds-db:eu-west-1:123456789012:dbuser:prx-0123456789abcdef0/sluice_rw":          true,
		"sluice_rw": false, "arn:aws:rds:eu-west-1:123456789012:db:orders": false,
	} {
		if re.MatchString(in) != want {
			t.Errorf("ConsumerMySQLDBUserArn admits %q: %v; want %v", in, !want, want)
		}
	}
	rule := strings.Join(block(t, text, "Rules", "MySQLIAMNeedsUserAndTLS"), "\n")
	for _, p := range []string{"ConsumerMySQLDBUserArn", "ConsumerMySQLCA", "ConsumerMySQLTLS", "ConsumerMySQLUser", "ConsumerMySQLHost"} {
		if !strings.Contains(rule, p) {
			t.Errorf("the rule MySQLIAMNeedsUserAndTLS does not check %s", p)
		}
	}
}

// TestTemplateBoundsAndRetention: every numeric parameter has an upper
// bound; the consumers' queue keeps messages QueueRetentionPeriod seconds
// (14 days by default: the controller holds backlogs on purpose) and the
// dead-letter queues keep them SQS's most, so that a message redriven
// late still has its time there.
func TestTemplateBoundsAndRetention(t *testing.T) {
	text := template(t)
	params := block(t, text, "Parameters")
	for _, l := range params {
		if len(l)-len(strings.TrimLeft(l, " ")) != 2 || !strings.HasSuffix(l, ":") {
			continue
		}
		name := strings.TrimSuffix(strings.TrimSpace(l), ":")
		p := block(t, text, "Parameters", name)
		if value(t, p, "Type") == "Number" && !strings.Contains(strings.Join(p, "\n"), "MaxValue:") {
			t.Errorf("Number parameter %s has no MaxValue", name)
		}
	}
	p := block(t, text, "Parameters", "QueueRetentionPeriod")
	if value(t, p, "Default") != "1209600" || value(t, p, "MaxValue") != "1209600" {
		t.Errorf("QueueRetentionPeriod: default %s, max %s; want 14 days (1209600 s) for both", value(t, p, "Default"), value(t, p, "MaxValue"))
	}
	if got := value(t, block(t, text, "Resources", "ConsumerQueue", "Properties"), "MessageRetentionPeriod"); got != "!Ref QueueRetentionPeriod" {
		t.Errorf("ConsumerQueue MessageRetentionPeriod %q; want !Ref QueueRetentionPeriod", got)
	}
	for _, q := range []string{"ConsumerDeadLetterQueue", "KafkaConsumerDeadLetterQueue", "KafkaConsumerFailureQueue"} {
		if got, err := strconv.Atoi(value(t, block(t, text, "Resources", q, "Properties"), "MessageRetentionPeriod")); err != nil || got != 1209600 {
			t.Errorf("%s MessageRetentionPeriod %d (%v); want 1209600", q, got, err)
		}
	}
}

// TestTemplateScanSkipsSayWhy: every check the IaC scan (checkov) is told
// to skip carries its reason beside the resource.
func TestTemplateScanSkipsSayWhy(t *testing.T) {
	lines := strings.Split(template(t), "\n")
	n := 0
	for i, l := range lines {
		id, ok := strings.CutPrefix(strings.TrimSpace(l), "- id: ")
		if !ok {
			continue
		}
		n++
		if !regexp.MustCompile(`^CKV_AWS_[0-9]+$`).MatchString(id) {
			t.Errorf("line %d: skip id %q", i+1, id)
		}
		if i+2 >= len(lines) || strings.TrimSpace(lines[i+1]) != "comment: >-" || len(strings.TrimSpace(lines[i+2])) < 40 {
			t.Errorf("line %d: the skip of %s has no reason", i+1, id)
		}
	}
	if n == 0 {
		t.Fatal("no checkov skip found: the test reads the wrong lines")
	}
}
