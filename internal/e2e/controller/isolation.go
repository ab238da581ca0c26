package main

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// The isolation scenario: ten loops, of which one has a corrupt STATE item,
// one an invalid statistic and one a Prometheus query that answers HTTP
// 500. The seven others must apply at every tick; the three must be
// reported with their reasons.
const (
	isoTicks       = 3
	isoCorrupt     = "iso-7"
	isoBadStat     = "iso-8"
	isoBrokenQuery = "iso-9"
)

// isoLoops are the ten loops, the three bad ones last.
var isoLoops = []string{"iso-0", "iso-1", "iso-2", "iso-3", "iso-4", "iso-5", "iso-6", isoCorrupt, isoBadStat, isoBrokenQuery}

// fakePrometheus answers instant queries: HTTP 500 for a query that names
// iso_broken, else a single series of value 60 sampled now (its
// timestamp() query answers the sample's time).
type fakePrometheus struct{ srv *http.Server }

func startFakePrometheus() (*fakePrometheus, string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		q := req.FormValue("query")
		now := time.Now().Unix()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.Contains(q, "iso_broken"):
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"status":"error","errorType":"internal","error":"query processing failed"}`)
		case strings.HasPrefix(q, "timestamp("):
			fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[%d,"%d"]}]}}`, now, now-20)
		default:
			fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[%d,"60"]}]}}`, now)
		}
	})
	p := &fakePrometheus{srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}}
	go p.srv.Serve(l)
	return p, "http://" + l.Addr().String(), nil
}

// isolation writes the ten loops, ticks isoTicks times and checks each
// invocation's applied loops and problems.
func (r *run) isolation() error {
	if err := r.writeIsoLoops(); err != nil {
		return err
	}
	ok := true
	for i := range isoTicks {
		r.waitDue()
		inv, err := r.invoke(i % 2)
		if err != nil {
			return fmt.Errorf("isolation tick %d: %w", i+1, err)
		}
		for _, id := range isoLoops[:7] {
			if _, applied := inv.Applied[id]; !applied || inv.Problems[id] != "" {
				ok = false
				r.Fail("isolation tick %d: loop %s not applied (%q)", i+1, id, inv.Problems[id])
			}
		}
		for id, want := range map[string]string{isoCorrupt: "STATE", isoBadStat: "params", isoBrokenQuery: "500"} {
			if !strings.Contains(inv.Problems[id], want) {
				ok = false
				r.Fail("isolation tick %d: loop %s reported %q; want a reason with %q", i+1, id, inv.Problems[id], want)
			}
		}
		r.Logf("isolation tick %d: %d applied, problems %v", i+1, len(inv.Applied), inv.Problems)
	}
	st, err := r.store.ReadStatus(r.Ctx, isoBadStat)
	if err != nil || st.Status != loop.StatusRefused || !strings.Contains(st.Reason, "metric_statistic") {
		ok = false
		r.Fail("isolation: PARAMS_STATUS of %s = %+v, %v; want refused naming metric_statistic", isoBadStat, st, err)
	}
	r.Res.IsolationOK = ok
	return nil
}

// writeIsoLoops writes the ten loops' PARAMS (copies of the e2e loop's,
// which tick every second) and the corrupt STATE item.
func (r *run) writeIsoLoops() error {
	base, err := r.store.ReadParams(r.Ctx, loopID)
	if err != nil {
		return err
	}
	for i, id := range isoLoops {
		p := map[string]any{}
		for k, v := range base {
			p[k] = v
		}
		p["mode"] = "auto"
		delete(p, "manual_rate")
		switch {
		case id == isoBadStat:
			p["metric_statistic"] = "Averge"
		case id == isoBrokenQuery || i == 5 || i == 6:
			p["metric_source"] = "prometheus"
			p["metric_promql"] = fmt.Sprintf(`max(iso_%s_cpu{loop=%q})`, map[bool]string{true: "broken", false: "good"}[id == isoBrokenQuery], id)
		}
		if err := r.store.WriteParams(r.Ctx, id, p); err != nil {
			return err
		}
	}
	cfg, err := awsconf.Load(r.Ctx)
	if err != nil {
		return err
	}
	_, err = dynamodb.NewFromConfig(cfg).PutItem(r.Ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: isoCorrupt}, "sk": &types.AttributeValueMemberS{Value: "STATE"},
		"version": &types.AttributeValueMemberS{Value: "seven"}, "controller": &types.AttributeValueMemberS{Value: "{not json"},
	}})
	if err != nil {
		return fmt.Errorf("write the corrupt STATE: %w", err)
	}
	return nil
}
