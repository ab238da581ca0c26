package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/dashboard"
	"github.com/sluice-dev/sluice/internal/dashboard/stepdemo"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbhistory"
	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
)

// recordingStore wraps memstore and records the PARAMS writes it receives.
type recordingStore struct {
	*memstore.Store
	writes []map[string]any
}

func (r *recordingStore) WriteParams(ctx context.Context, id string, attrs map[string]any) error {
	r.writes = append(r.writes, attrs)
	return r.Store.WriteParams(ctx, id, attrs)
}

func (r *recordingStore) WriteParamsIf(ctx context.Context, id string, attrs map[string]any, read int64) error {
	if err := r.Store.WriteParamsIf(ctx, id, attrs, read); err != nil {
		return err
	}
	r.writes = append(r.writes, attrs)
	return nil
}

type lister []string

func (l lister) Loops(context.Context) ([]string, error) { return l, nil }

func newServer(t *testing.T, token string) (*httptest.Server, *recordingStore, *ddbhistory.Memory) {
	t.Helper()
	store := &recordingStore{Store: memstore.New()}
	now := func() time.Time { return time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC) }
	if err := store.Store.WriteParams(context.Background(), "orders", stepdemo.DefaultParams()); err != nil {
		t.Fatal(err)
	}
	params := dashboard.NewLoopParams(store, now)
	hist := ddbhistory.NewMemory(0)
	srv, err := dashboard.New(dashboard.Config{
		History: hist, Params: params, Writer: params, Validator: params, Loops: lister{"orders"},
		Token: token, Fields: dashboard.LoopFields(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts, store, hist
}

func post(t *testing.T, ts *httptest.Server, body string, header map[string]string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/api/loops/orders/params", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

func TestSetParams(t *testing.T) {
	tests := []struct {
		name       string
		token      string
		body       string
		header     map[string]string
		wantCode   int
		wantWrites int
		wantErr    string
	}{
		{"valid edit", "", `{"params":{"setpoint":55}}`, nil, 200, 1, ""},
		{"invalid setpoint refused", "", `{"params":{"setpoint":150}}`, nil, 422, 0, "setpoint: 150 is outside (0, 100]"},
		{"wrong type refused", "", `{"params":{"kp":"fast"}}`, nil, 422, 0, "kp: want a number"},
		{"min above max refused", "", `{"params":{"min_rate":5000}}`, nil, 422, 0, "min_rate"},
		{"unknown mode refused", "", `{"params":{"mode":"turbo"}}`, nil, 422, 0, "unknown mode"},
		{"removing a required attribute refused", "", `{"params":{"setpoint":null}}`, nil, 422, 0, "setpoint: missing"},
		{"removing an optional attribute", "", `{"params":{"slew_limit":null}}`, nil, 200, 1, ""},
		{"experiment button", "", `{"params":{"experiment":"id=dash-1,step=5,abort_above=85,max_duration=20m"}}`, nil, 200, 1, ""},
		{"experiment beyond its limits refused", "", `{"params":{"experiment":"id=dash-2,step=30,abort_above=85,max_duration=20m"}}`, nil, 422, 0, "at most 20"},
		{"empty edit", "", `{"params":{}}`, nil, 400, 0, "at least one field"},
		{"bad JSON", "", `{"params":`, nil, 400, 0, "invalid JSON"},
		{"token missing", "tok", `{"params":{"setpoint":55}}`, nil, 401, 0, "requires a token"},
		{"token wrong", "tok", `{"params":{"setpoint":55}}`, map[string]string{"Authorization": "Bearer nope"}, 401, 0, "requires a token"},
		{"token right", "tok", `{"params":{"setpoint":55}}`, map[string]string{"Authorization": "Bearer tok"}, 200, 1, ""},
		{"cross-origin refused", "", `{"params":{"setpoint":55}}`, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, 403, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, store, _ := newServer(t, tt.token)
			code, body := post(t, ts, tt.body, tt.header)
			if code != tt.wantCode {
				t.Errorf("POST %s = %d %v; want %d", tt.body, code, body, tt.wantCode)
			}
			if len(store.writes) != tt.wantWrites {
				t.Errorf("POST %s wrote %d times; want %d", tt.body, len(store.writes), tt.wantWrites)
			}
			if msg, _ := body["error"].(string); !strings.Contains(msg, tt.wantErr) {
				t.Errorf("POST %s error = %q; want it to contain %q", tt.body, msg, tt.wantErr)
			}
		})
	}
}

func TestSetParamsMergesAndStamps(t *testing.T) {
	ts, store, _ := newServer(t, "")
	if code, body := post(t, ts, `{"params":{"setpoint":55,"slew_limit":null}}`, nil); code != 200 {
		t.Fatalf("POST = %d %v", code, body)
	}
	got, err := store.ReadParams(context.Background(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	if kp := stepdemo.DefaultParams()["kp"]; got["setpoint"] != 55.0 || got["kp"] != kp || got["updated_by"] != "dashboard" || got["updated_at"] != "2026-11-29T23:00:00Z" {
		t.Errorf("stored PARAMS = %v; want setpoint 55, kp kept at %v, stamped by the dashboard", got, kp)
	}
	if _, ok := got["slew_limit"]; ok {
		t.Errorf("slew_limit still stored after a null edit: %v", got["slew_limit"])
	}
}

func TestFormPost(t *testing.T) {
	ts, store, _ := newServer(t, "tok")
	for _, tt := range []struct {
		form url.Values
		code int
	}{
		{url.Values{"setpoint": {"60"}}, 401},
		{url.Values{"setpoint": {"60"}, "token": {"tok"}}, 200},
		{url.Values{"setpoint": {"abc"}, "token": {"tok"}}, 422},
	} {
		res, err := ts.Client().PostForm(ts.URL+"/api/loops/orders/params", tt.form)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tt.code {
			t.Errorf("POST form %v = %d; want %d", tt.form, res.StatusCode, tt.code)
		}
	}
	got, _ := store.ReadParams(context.Background(), "orders")
	if got["setpoint"] != 60.0 {
		t.Errorf("stored setpoint = %v; want 60 from the one authorized form", got["setpoint"])
	}
}

func TestHistoryAPI(t *testing.T) {
	ts, _, hist := newServer(t, "")
	t0 := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	for k := range 10 {
		p := dashboard.Point{T: t0.Add(time.Duration(k) * time.Minute), Setpoint: 70, Measured: 60 + float64(k), Rate: 100,
			Consumed: math.NaN(), Depth: math.NaN(), Stale: k == 3}
		if k == 3 {
			p.Measured = math.NaN()
		}
		_ = hist.Append(context.Background(), "orders", p)
	}
	tests := []struct {
		query    string
		code     int
		wantLen  int
		wantLast float64
	}{
		{"", 200, 10, 69},
		{"?limit=4", 200, 4, 69},
		{fmt.Sprintf("?since=%d&limit=2", t0.Add(5*time.Minute).UnixMilli()), 200, 2, 67},
		{"?limit=0", 400, 0, 0},
		{"?since=yesterday", 400, 0, 0},
	}
	for _, tt := range tests {
		res, err := ts.Client().Get(ts.URL + "/api/loops/orders/history" + tt.query)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Points []dashboard.Point `json:"points"`
		}
		_ = json.NewDecoder(res.Body).Decode(&body)
		res.Body.Close()
		if res.StatusCode != tt.code || len(body.Points) != tt.wantLen {
			t.Errorf("GET history%s = %d with %d points; want %d with %d", tt.query, res.StatusCode, len(body.Points), tt.code, tt.wantLen)
			continue
		}
		if tt.wantLen > 0 && body.Points[len(body.Points)-1].Measured != tt.wantLast {
			t.Errorf("GET history%s last measured = %v; want %v", tt.query, body.Points[len(body.Points)-1].Measured, tt.wantLast)
		}
	}
}

func TestPointJSON(t *testing.T) {
	p := dashboard.Point{T: time.UnixMilli(1796000000123).UTC(), Setpoint: 70, Measured: math.NaN(), Rate: 10, Consumed: math.Inf(1),
		P: 1, I: 2, FF: 3, Stale: true, Depth: 5, Mode: "shadow"}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"t":1796000000123,"setpoint":70,"measured":null,"rate":10,"consumed":null,"p":1,"i":2,"ff":3,"saturated":false,"stale":true,"depth":5,"mode":"shadow"}`
	if string(b) != want {
		t.Errorf("json.Marshal(point) = %s; want %s", b, want)
	}
	var back dashboard.Point
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !back.T.Equal(p.T) || !math.IsNaN(back.Measured) || !math.IsNaN(back.Consumed) || back.FF != 3 || back.Mode != "shadow" {
		t.Errorf("round trip = %+v; want %+v with NaN for null", back, p)
	}
}

func TestCheckListen(t *testing.T) {
	tests := []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:8080", "", true},
		{"localhost:8080", "", true},
		{"[::1]:8080", "", true},
		{"0.0.0.0:8080", "", false},
		{":8080", "", false},
		{"10.1.2.3:8080", "", false},
		{"0.0.0.0:8080", "s3cret", true},
		{"nonsense", "", false},
	}
	for _, tt := range tests {
		if err := dashboard.CheckListen(tt.addr, tt.token); (err == nil) != tt.ok {
			t.Errorf("CheckListen(%q, %q) = %v; want ok=%v", tt.addr, tt.token, err, tt.ok)
		}
	}
}

func TestNewRequiresValidator(t *testing.T) {
	hist := ddbhistory.NewMemory(0)
	p := dashboard.NewLoopParams(memstore.New(), time.Now)
	_, err := dashboard.New(dashboard.Config{History: hist, Params: p, Writer: p, Loops: lister{}})
	if err == nil {
		t.Fatal("New with a Writer and no Validator = nil error; want a refusal")
	}
	if _, err := dashboard.New(dashboard.Config{History: hist, Params: p, Loops: lister{}}); err != nil {
		t.Errorf("New read-only = %v; want nil", err)
	}
}

func TestParamsNotFound(t *testing.T) {
	p := dashboard.NewLoopParams(memstore.New(), time.Now)
	if _, err := p.Params(context.Background(), "nope"); !errors.Is(err, dashboard.ErrNotFound) {
		t.Errorf("Params(nope) = %v; want ErrNotFound", err)
	}
}

func TestPageAndAssets(t *testing.T) {
	ts, _, _ := newServer(t, "")
	for _, tt := range []struct{ path, want string }{
		{"/", "<canvas id=\"chart-cpu\""},
		{"/static/app.js", "function draw("},
		{"/static/style.css", ".chart"},
	} {
		res, err := ts.Client().Get(ts.URL + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(body), tt.want) {
			t.Errorf("GET %s = %d, body without %q", tt.path, res.StatusCode, tt.want)
		}
		if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy = %q; want default-src 'self'", tt.path, csp)
		}
	}
}

// TestSetParamsConflict: an edit made on a version no longer stored is
// refused with 409 and nothing is written; the edit on the current version
// applies.
func TestSetParamsConflict(t *testing.T) {
	ts, store, _ := newServer(t, "")
	code, body := post(t, ts, `{"params":{"setpoint":55},"version":0}`, nil)
	if code != http.StatusOK || body["version"] != 1.0 {
		t.Fatalf("first edit at version 0 = %d, %v; want 200 at version 1", code, body)
	}
	code, body = post(t, ts, `{"params":{"setpoint":45},"version":0}`, nil)
	if code != http.StatusConflict || body["conflict"] != true || len(store.writes) != 1 {
		t.Errorf("second edit at version 0 = %d, %v, %d writes; want 409, a conflict, nothing written", code, body, len(store.writes))
	}
	if attrs, _ := store.ReadParams(context.Background(), "orders"); attrs["setpoint"] != 55.0 {
		t.Errorf("setpoint = %v; want the first edit's 55 kept", attrs["setpoint"])
	}
	// Another writer between the server's read and its write: the
	// conditional write refuses.
	params := dashboard.NewLoopParams(store, time.Now)
	cur, _ := params.Params(context.Background(), "orders")
	if err := store.Store.WriteParamsIf(context.Background(), "orders", map[string]any{"setpoint": 50.0}, cur.Version); err != nil {
		t.Fatal(err)
	}
	if err := params.SetParamsIf(context.Background(), "orders", dashboard.Params{"setpoint": 40.0}, cur.Version); !errors.Is(err, dashboard.ErrConflict) {
		t.Errorf("SetParamsIf on a changed item = %v; want ErrConflict", err)
	}
}

// TestHostCheck: a request naming another host (a DNS-rebinding page) is
// refused, reads and writes alike; loopback names and the allowed hosts
// pass.
func TestHostCheck(t *testing.T) {
	ts, store, _ := newServer(t, "")
	do := func(method, host, path string) int {
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(`{"params":{"setpoint":55}}`))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	port := ts.URL[strings.LastIndex(ts.URL, ":"):]
	for _, h := range []string{"rebind.example" + port, "rebind.example", "127.0.0.1.nip.example" + port} {
		if code := do("GET", h, "/api/loops/orders/params"); code != http.StatusMisdirectedRequest {
			t.Errorf("GET with Host %q = %d; want 421", h, code)
		}
		if code := do("POST", h, "/api/loops/orders/params"); code != http.StatusMisdirectedRequest {
			t.Errorf("POST with Host %q = %d; want 421", h, code)
		}
	}
	if len(store.writes) != 0 {
		t.Errorf("%d writes through a foreign Host; want none", len(store.writes))
	}
	for _, h := range []string{"127.0.0.1" + port, "localhost" + port, "LOCALHOST" + port} {
		if code := do("GET", h, "/api/loops/orders/params"); code != http.StatusOK {
			t.Errorf("GET with Host %q = %d; want 200", h, code)
		}
	}
	srv, err := dashboard.New(dashboard.Config{History: ddbhistory.NewMemory(0), Params: dashboard.NewLoopParams(store, time.Now), Loops: lister{"orders"}, AllowedHosts: []string{"sluice.internal"}})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]int{"sluice.internal:8080": http.StatusOK, "127.0.0.1:8080": http.StatusMisdirectedRequest} {
		req := httptest.NewRequest("GET", "/api/loops/orders/params", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("AllowedHosts [sluice.internal]: Host %q = %d; want %d", host, rec.Code, want)
		}
	}
}

// TestEditAudit: an edit records who made it (the proxy's user header, else
// the dashboard's user), when and what changed, in PARAMS and in the log.
func TestEditAudit(t *testing.T) {
	store := &recordingStore{Store: memstore.New()}
	now := func() time.Time { return time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC) }
	if err := store.Store.WriteParams(context.Background(), "orders", stepdemo.DefaultParams()); err != nil {
		t.Fatal(err)
	}
	params := dashboard.NewLoopParams(store, now)
	var logs bytes.Buffer
	srv, err := dashboard.New(dashboard.Config{History: ddbhistory.NewMemory(0), Params: params, Writer: params, Validator: params,
		Loops: lister{"orders"}, Fields: dashboard.LoopFields(), Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		User: "dashboard:ops", UserHeader: "X-Forwarded-User"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	sp := stepdemo.DefaultParams()["setpoint"]
	for _, tt := range []struct {
		header map[string]string
		body   string
		who    string
		change string
	}{
		{nil, `{"params":{"setpoint":55}}`, "dashboard:ops", fmt.Sprintf("setpoint: %v -> 55", sp)},
		{map[string]string{"X-Forwarded-User": "alice@example.com"}, `{"params":{"setpoint":60}}`, "alice@example.com", "setpoint: 55 -> 60"},
	} {
		if code, body := post(t, ts, tt.body, tt.header); code != 200 {
			t.Fatalf("POST %s = %d %v", tt.body, code, body)
		}
		got, _ := store.ReadParams(context.Background(), "orders")
		if got["updated_by"] != tt.who || got["updated_changes"] != tt.change || got["updated_at"] == nil {
			t.Errorf("stored audit by %v, changes %v, at %v; want %s, %q, a time", got["updated_by"], got["updated_changes"], got["updated_at"], tt.who, tt.change)
		}
		if !strings.Contains(logs.String(), `"updated_by":"`+tt.who+`"`) || !strings.Contains(logs.String(), tt.change) {
			t.Errorf("log %s; want the edit by %s (%s)", logs.String(), tt.who, tt.change)
		}
	}
	st, err := params.Params(context.Background(), "orders")
	if err != nil || st.UpdatedBy != "alice@example.com" || st.Changes != "setpoint: 55 -> 60" || st.Params["updated_changes"] != nil {
		t.Errorf("Params = %+v, %v; want updated by alice, the change, and no audit attribute among the parameters", st, err)
	}
}
