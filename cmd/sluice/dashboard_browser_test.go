package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/chromedp/chromedp"

	"github.com/sluice-dev/sluice/internal/dashboard"
	"github.com/sluice-dev/sluice/internal/dashboard/stepdemo"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbhistory"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbloop"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore/ddbtest"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
)

// These tests drive the dashboard in a real headless Chromium (Debian's
// chromium; SLUICE_CHROMIUM_BIN overrides the path). With
// SLUICE_SCREENSHOTS=1 they also write docs/img/dashboard*.png.

// startDashboard runs serveDashboard in the background and returns its URL.
func startDashboard(t *testing.T, c dashboardConfig) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- serveDashboard(ctx, c, io.Discard, io.Discard, func(u string) { urls <- u }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serveDashboard: %v", err)
		}
	})
	select {
	case u := <-urls:
		return u
	case err := <-done:
		t.Fatalf("serveDashboard: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("dashboard did not start within 30s")
	}
	return ""
}

// browser starts headless Chromium with the flags that work on a closed network and a new
// empty profile; never a downloaded browser.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	bin := testenv.Binary(t, "SLUICE_CHROMIUM_BIN", "chromium")
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 1000),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancel := chromedp.NewContext(actx)
	if err := chromedp.Do(bctx); err != nil { // starts the browser: no timeout on this context
		cancel()
		acancel()
		t.Fatalf("start chromium %s: %v", bin, err)
	}
	ctx, tcancel := context.WithTimeout(bctx, 10*time.Minute) // bounds a failure, not a pass
	t.Cleanup(func() { tcancel(); cancel(); acancel() })
	return ctx
}

// cdp runs browser steps, failing the test with what on error.
func cdp(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// value runs one browser action and returns its value.
func cdpValue[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// cdpPatience is the least a poll waits before it fails: a page's round
// trip through the dashboard to moto takes well under a second on a quiet
// machine and took more than 10 s on a busy one (a CI run beside chaos
// scenarios). The poll returns as soon as its predicate holds, so the
// patience only bounds a failure.
const cdpPatience = time.Minute

// until polls a JavaScript predicate for at least cdpPatience (d, when
// longer).
func cdpUntil(expr string, d time.Duration) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(max(d, cdpPatience)))
}

func cdpCSS(s string) chromedp.CSS { return chromedp.CSS(s) }

// screenshot writes docs/img/<name>.png when SLUICE_SCREENSHOTS=1.
func dashScreenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv("SLUICE_SCREENSHOTS") != "1" {
		return
	}
	png := cdpValue(t, ctx, "screenshot", chromedp.FullScreenshot(100))
	path := filepath.Join("..", "..", "docs", "img", name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, len(png))
}

// dashInkJS counts the pixels of a canvas drawn in a saturated colour: the
// series lines, not the grey grid and labels.
const dashInkJS = `(function(id){const c=document.getElementById(id);const d=c.getContext('2d').getImageData(0,0,c.width,c.height).data;let n=0;for(let i=0;i<d.length;i+=4){const mx=Math.max(d[i],d[i+1],d[i+2]),mn=Math.min(d[i],d[i+1],d[i+2]);if(d[i+3]>200&&mx-mn>60)n++;}return n;})`

func TestBrowserDemo(t *testing.T) {
	ctx := newBrowser(t)
	url := startDashboard(t, dashboardConfig{listen: "127.0.0.1:0", demo: true, speed: 60, prefill: 180})
	cdp(t, ctx, "load page", chromedp.Navigate(url), chromedp.WaitVisible(cdpCSS("#chart-cpu")),
		cdpUntil(`Number(document.getElementById('chart-cpu').dataset.points) > 0`, 20*time.Second))

	drawn := cdpValue(t, ctx, "count charts", chromedp.Evaluate[int](`[...document.querySelectorAll('canvas')].filter(c => Number(c.dataset.points) > 0).length`))
	if drawn < 2 {
		t.Errorf("%d charts have data points; want at least 2", drawn)
	}
	for _, id := range []string{"chart-cpu", "chart-rate", "chart-terms", "chart-depth"} {
		points := cdpValue(t, ctx, "points of "+id, chromedp.Evaluate[int](fmt.Sprintf(`Number(document.getElementById(%q).dataset.points)`, id)))
		ink := cdpValue(t, ctx, "pixels of "+id, chromedp.Evaluate[int](fmt.Sprintf(`%s(%q)`, dashInkJS, id)))
		if points < 100 || ink < 200 {
			t.Errorf("%s: %d data points, %d coloured pixels; want >= 100 points drawn and >= 200 pixels", id, points, ink)
		}
	}
	text := cdpValue(t, ctx, "read text", chromedp.Evaluate[string](`document.body.innerText`))
	if !strings.Contains(text, "setpoint") {
		t.Errorf("page text does not contain %q:\n%s", "setpoint", text)
	}
	if hidden := cdpValue(t, ctx, "inner charts", chromedp.Evaluate[bool](`document.getElementById('inner-charts').hidden`)); !hidden {
		t.Errorf("the inner loop's charts are shown for consumers that run none")
	}

	// the data moves: the newest point's time changes between two reads
	first := cdpValue(t, ctx, "first read", chromedp.Evaluate[string](`document.getElementById('chart-cpu').dataset.last`))
	cdp(t, ctx, "wait for a new point", cdpUntil(
		fmt.Sprintf(`document.getElementById('chart-cpu').dataset.last !== %q`, first), 20*time.Second))
	second := cdpValue(t, ctx, "second read", chromedp.Evaluate[string](`document.getElementById('chart-cpu').dataset.last`))
	a, _ := strconv.ParseInt(first, 10, 64)
	b, _ := strconv.ParseInt(second, 10, 64)
	if b <= a {
		t.Errorf("newest point went from %d to %d; want it to advance", a, b)
	}
	dashScreenshot(t, ctx, "dashboard")

	// the form: the operator's fields first, the rest behind "advanced",
	// numbers rounded to their meaning (and sent back as stored when
	// untouched)
	order := cdpValue(t, ctx, "form order", chromedp.Evaluate[string](`[...document.querySelectorAll('#fields > .row')].map(r => r.id).join(',')`))
	if order != "row-setpoint,row-manual_rate,row-min_rate,row-max_rate" {
		t.Errorf("form rows before advanced = %s; want setpoint, manual_rate, min_rate, max_rate", order)
	}
	if open := cdpValue(t, ctx, "advanced closed", chromedp.Evaluate[bool](`!!document.getElementById('advanced') && !document.getElementById('advanced').open && document.querySelectorAll('#advanced .row').length > 20`)); !open {
		t.Errorf("the other parameters are not behind a closed advanced section")
	}
	ffShown := cdpValue(t, ctx, "ff_base shown", chromedp.Evaluate[string](`document.getElementById('f-ff_base').value`))
	ffStored := cdpValue(t, ctx, "ff_base stored", chromedp.Evaluate[string](`JSON.stringify(st.params.ff_base)`))
	if len(strings.Trim(ffShown, "-.0")) > 5 || ffShown == ffStored {
		t.Errorf("ff_base shown as %q (stored %s); want it rounded to four significant figures", ffShown, ffStored)
	}

	// an edit through the form applies to the demo loop, an invalid one shows its reason
	cdp(t, ctx, "set setpoint 55", chromedp.SetValue(cdpCSS("#f-setpoint"), "55"), chromedp.Click(cdpCSS("#save")),
		cdpUntil(`document.getElementById('params-message').textContent.startsWith('Saved')`, 10*time.Second))
	cdp(t, ctx, "wait for setpoint 55 on the chart", cdpUntil(`document.getElementById('now').innerText.includes('setpoint 55.0 %')`, 20*time.Second))
	if after := cdpValue(t, ctx, "ff_base after the edit", chromedp.Evaluate[string](`JSON.stringify(st.params.ff_base)`)); after != ffStored {
		t.Errorf("ff_base after an edit of the setpoint = %s; want it unchanged, %s (the rounded value sent back as stored)", after, ffStored)
	}
	cdp(t, ctx, "set an invalid max rate", chromedp.SetValue(cdpCSS("#f-max_rate"), "-1"), chromedp.Click(cdpCSS("#save")),
		cdpUntil(`document.getElementById('params-message').textContent.startsWith('Refused')`, 10*time.Second))
	msg := cdpValue(t, ctx, "read refusal", chromedp.Text(cdpCSS("#params-message")))
	if !strings.Contains(msg, "max_rate") {
		t.Errorf("refusal message %q does not name max_rate", msg)
	}
	dashScreenshot(t, ctx, "dashboard-refused")
}

// With --inner-loop the demo's consumers run the inner loop: the latency
// chart shows their store latency against its learned reference, shaded
// where they cut (the disturbance at minute 60 of the prefill), and the
// cut's chart the rate they withheld.
func TestBrowserDemoInnerLoop(t *testing.T) {
	ctx := newBrowser(t)
	c := dashboardConfig{listen: "127.0.0.1:0", demo: true, speed: 60, prefill: 180}
	c.traffic.Inner = true
	url := startDashboard(t, c)
	cdp(t, ctx, "load page", chromedp.Navigate(url), chromedp.WaitVisible(cdpCSS("#chart-latency")),
		cdpUntil(`Number(document.getElementById('chart-latency').dataset.points) > 0`, 20*time.Second))
	for _, id := range []string{"chart-latency", "chart-cut"} {
		points := cdpValue(t, ctx, "points of "+id, chromedp.Evaluate[int](fmt.Sprintf(`Number(document.getElementById(%q).dataset.points)`, id)))
		ink := cdpValue(t, ctx, "pixels of "+id, chromedp.Evaluate[int](fmt.Sprintf(`%s(%q)`, dashInkJS, id)))
		if points < 20 || ink < 100 {
			t.Errorf("%s: %d data points, %d coloured pixels; want >= 20 points drawn and >= 100 pixels", id, points, ink)
		}
	}
	if cut := cdpValue(t, ctx, "cut ticks", chromedp.Evaluate[int](`Number(document.getElementById('chart-latency').dataset.cutting)`)); cut == 0 {
		t.Errorf("the latency chart shades no tick where the inner loop cut; want the disturbance's")
	}
	series := cdpValue(t, ctx, "latency series", chromedp.Evaluate[string](`[st.points.filter(p => p.inner_latency_ms > 0).length, st.points.filter(p => p.inner_reference_ms > 0).length].join(',')`))
	if n := strings.Split(series, ","); len(n) != 2 || n[0] == "0" || n[1] == "0" {
		t.Errorf("points with the latency, with the reference: %s; want both", series)
	}
	if text := cdpValue(t, ctx, "read text", chromedp.Evaluate[string](`document.getElementById('now').innerText`)); !strings.Contains(text, "latency") {
		t.Errorf("the header %q does not show the consumers' latency", text)
	}
	dashScreenshot(t, ctx, "dashboard-inner")
}

// dashMotoTable creates a fresh table with one loop's valid PARAMS and an hour
// of history.
func dashMotoTable(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	testenv.AWSEndpoint(t)
	client, table := ddbtest.Table(t, "sluice-dash")
	ctx := context.Background()
	ps := dashboard.NewLoopParams(ddbloop.New(client, table), time.Now)
	p := stepdemo.DefaultParams()
	p["metric_dimensions"] = map[string]any{"DBInstanceIdentifier": "orders-db"}
	if err := ps.SetParams(ctx, "orders", p); err != nil {
		t.Fatal(err)
	}
	hist := ddbhistory.New(client, table)
	t0 := time.Now().UTC().Truncate(time.Minute).Add(-time.Hour)
	for k := range 60 {
		y := 70 + 8*math.Sin(float64(k)/6)
		pt := dashboard.Point{T: t0.Add(time.Duration(k) * time.Minute), Setpoint: 70, Measured: y, Rate: 1200 - 20*(y-70),
			Consumed: 1190 - 20*(y-70), P: -(y - 70), I: -20 * (y - 70), FF: 1200, Depth: 50000 - 500*float64(k), Mode: "auto",
			Stale: k >= 40 && k < 44, Saturated: k >= 20 && k < 24}
		if pt.Stale {
			pt.Measured = math.NaN()
		}
		// Override control: a replication-lag signal that limits the
		// rate in the last half hour.
		lag := 10 + 4*math.Sin(float64(k)/5)
		pt.Signals = []dashboard.SignalPoint{{Name: "cpu", Unit: "%", Setpoint: 70, Measured: pt.Measured}, {Name: "lag", Unit: "s", Setpoint: 10, Measured: lag}}
		pt.Limiting = "cpu"
		if k >= 30 {
			pt.Limiting = "lag"
		}
		// The tick's reason: limited, the slew limit, stale: four changes.
		pt.Reason, pt.ReasonText = "limited", fmt.Sprintf("limited by %s", pt.Limiting)
		if pt.Saturated {
			pt.Reason, pt.ReasonText = "slew", "slew limit"
		}
		if pt.Stale {
			pt.Reason, pt.ReasonText = "stale", "stale: hold"
		}
		if err := hist.Append(ctx, "orders", pt); err != nil {
			t.Fatal(err)
		}
	}
	return client, table
}

func storedSetpoint(t *testing.T, client *dynamodb.Client, table string) string {
	t.Helper()
	out, err := client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "orders"}, "sk": &types.AttributeValueMemberS{Value: "PARAMS"}}})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := out.Item["setpoint"].(*types.AttributeValueMemberN)
	if n == nil {
		t.Fatalf("PARAMS has no numeric setpoint: %v", out.Item)
	}
	return n.Value
}

// clickPause clicks the pause button and waits until it reads want, or
// until the page says why the write failed (the pause message, which the
// failure then quotes).
func clickPause(t *testing.T, ctx context.Context, want string) {
	t.Helper()
	cdp(t, ctx, "click the pause button for "+want, chromedp.Click(cdpCSS("#pause")),
		cdpUntil(fmt.Sprintf(`document.getElementById('pause').textContent === %q || document.getElementById('pause-message').className.includes('bad')`, want), 10*time.Second))
	if got := cdpValue(t, ctx, "pause button", chromedp.Evaluate[string](`document.getElementById('pause').textContent`)); got != want {
		msg := cdpValue(t, ctx, "pause message", chromedp.Evaluate[string](`document.getElementById('pause-message').textContent`))
		t.Fatalf("after the click the pause button reads %q, want %q: %s", got, want, msg)
	}
}

func TestBrowserMoto(t *testing.T) {
	client, table := dashMotoTable(t)
	ctx := newBrowser(t)

	t.Run("edit lands in DynamoDB and shows on the page", func(t *testing.T) {
		url := startDashboard(t, dashboardConfig{listen: "127.0.0.1:0", table: table})
		cdp(t, ctx, "load", chromedp.Navigate(url+"#orders"), chromedp.WaitVisible(cdpCSS("#f-setpoint")),
			cdpUntil(`Number(document.getElementById('chart-cpu').dataset.points) >= 100`, 15*time.Second))
		dashScreenshot(t, ctx, "dashboard-moto")
		// One chart per further signal, shaded where it limits.
		cdp(t, ctx, "signal chart", cdpUntil(`document.getElementById('chart-sig-lag') !== null && Number(document.getElementById('chart-sig-lag').dataset.points) >= 100`, 10*time.Second))
		lagLimits := cdpValue(t, ctx, "lag limiting ticks", chromedp.Evaluate[int](`Number(document.getElementById('chart-sig-lag').dataset.limiting)`))
		cpuLimits := cdpValue(t, ctx, "cpu limiting ticks", chromedp.Evaluate[int](`Number(document.getElementById('chart-cpu').dataset.limiting)`))
		if lagLimits != 30 || cpuLimits != 30 {
			t.Errorf("ticks shaded as limiting: lag %d, cpu %d; want 30 each", lagLimits, cpuLimits)
		}
		// A mark where the reason changed (limited, slew, limited, stale,
		// limited), and the newest tick's reason in the header.
		if marks := cdpValue(t, ctx, "reason marks", chromedp.Evaluate[int](`Number(document.getElementById('chart-cpu').dataset.reasons)`)); marks != 4 {
			t.Errorf("reason marks on the CPU chart = %d; want 4", marks)
		}
		if now := cdpValue(t, ctx, "header", chromedp.Evaluate[string](`document.getElementById('now').innerText`)); !strings.Contains(now, "reason limited by lag") {
			t.Errorf("header %q; want the newest tick's reason", now)
		}
		cdp(t, ctx, "edit", chromedp.SetValue(cdpCSS("#f-setpoint"), "55"), chromedp.Click(cdpCSS("#save")),
			cdpUntil(`document.getElementById('params-message').textContent.startsWith('Saved')`, 10*time.Second))
		if got := storedSetpoint(t, client, table); got != "55" {
			t.Fatalf("stored setpoint = %s after a form edit to 55; want 55", got)
		}
		cdp(t, ctx, "reload", chromedp.Reload(), chromedp.WaitVisible(cdpCSS("#f-setpoint")),
			cdpUntil(`document.getElementById('params-status').textContent.includes('updated')`, 10*time.Second))
		shown := cdpValue(t, ctx, "read setpoint", chromedp.Value(cdpCSS("#f-setpoint")))
		if shown != "55" {
			t.Errorf("after reload the form shows setpoint %q; want 55", shown)
		}

		cdp(t, ctx, "invalid edit", chromedp.SetValue(cdpCSS("#f-setpoint"), "150"), chromedp.Click(cdpCSS("#save")),
			cdpUntil(`document.getElementById('params-message').textContent.startsWith('Refused')`, 10*time.Second))
		msg := cdpValue(t, ctx, "read refusal", chromedp.Text(cdpCSS("#params-message")))
		if !strings.Contains(msg, "setpoint") || !strings.Contains(msg, "(0, 100]") {
			t.Errorf("refusal = %q; want the setpoint's reason", msg)
		}
		if got := storedSetpoint(t, client, table); got != "55" {
			t.Errorf("stored setpoint = %s after a refused edit; want the valid 55 kept", got)
		}
	})

	t.Run("the pause button pauses and resumes the loop", func(t *testing.T) {
		store := ddbloop.New(client, table)
		url := startDashboard(t, dashboardConfig{listen: "127.0.0.1:0", table: table})
		// The click waits for the page to settle: the signal charts the
		// first poll inserts above the parameters (below the charts in a
		// narrow window) move the button, and a click at its former place
		// misses it (the step failed so now and then, with any patience).
		cdp(t, ctx, "load", chromedp.Navigate(url+"#orders"), chromedp.WaitVisible(cdpCSS("#f-setpoint")),
			cdpUntil(`document.getElementById('pause').textContent === 'Pause'`, 10*time.Second),
			cdpUntil(`document.getElementById('chart-sig-lag') !== null && Number(document.getElementById('chart-sig-lag').dataset.points) >= 100`, 10*time.Second))
		clickPause(t, ctx, "Resume")
		if attrs, err := store.ReadParams(context.Background(), "orders"); err != nil || attrs[loop.AttrPaused] != true {
			t.Fatalf("after Pause: PARAMS %v, %v; want paused true", attrs, err)
		}
		clickPause(t, ctx, "Pause")
		if attrs, err := store.ReadParams(context.Background(), "orders"); err != nil || attrs[loop.AttrPaused] != nil {
			t.Errorf("after Resume: PARAMS %v, %v; want no paused attribute", attrs, err)
		}
	})

	t.Run("a refusal recorded by the controller shows with its reason", func(t *testing.T) {
		ctxb := context.Background()
		store := ddbloop.New(client, table)
		bad := stepdemo.DefaultParams()
		bad["metric_dimensions"] = map[string]any{"DBInstanceIdentifier": "orders-db"}
		bad["kp"] = "fast" // as an operator's `aws dynamodb update-item` might
		if err := store.WriteParams(ctxb, "broken", bad); err != nil {
			t.Fatal(err)
		}
		ticker := loop.Ticker{Sources: looptest.Sources(), Store: store, Now: time.Now}
		if _, err := ticker.Tick(ctxb); err != nil {
			t.Fatalf("controller tick: %v", err)
		}
		url := startDashboard(t, dashboardConfig{listen: "127.0.0.1:0", table: table})
		cdp(t, ctx, "load", chromedp.Navigate(url+"#broken"), chromedp.WaitReady(cdpCSS("#params-refusal")),
			cdpUntil(`!document.getElementById('params-refusal').hidden`, 10*time.Second))
		msg := cdpValue(t, ctx, "read refusal", chromedp.Text(cdpCSS("#params-refusal")))
		if !strings.Contains(msg, "kp") {
			t.Errorf("refusal banner = %q; want the controller's reason naming kp", msg)
		}
		dashScreenshot(t, ctx, "dashboard-controller-refusal")

		// fixing it through the form writes a valid item; the old verdict no longer shows
		cdp(t, ctx, "fix kp", chromedp.SetValue(cdpCSS("#f-kp"), "1"), chromedp.Click(cdpCSS("#save")),
			cdpUntil(`document.getElementById('params-message').textContent.startsWith('Saved')`, 10*time.Second))
		attrs, err := store.ReadParams(ctxb, "broken")
		if err != nil {
			t.Fatal(err)
		}
		if attrs["kp"] != 1.0 {
			t.Errorf("stored kp = %#v after the fix; want the number 1", attrs["kp"])
		}
		if _, err := loop.DecodeParams("broken", attrs, looptest.Sources()); err != nil {
			t.Errorf("stored PARAMS after the fix are refused by the controller's decoder: %v", err)
		}
		cdp(t, ctx, "reload", chromedp.Reload(), chromedp.WaitVisible(cdpCSS("#f-kp")),
			cdpUntil(`document.getElementById('params-status').textContent.includes('updated')`, 10*time.Second))
		if hidden := cdpValue(t, ctx, "banner", chromedp.Evaluate[bool](`document.getElementById('params-refusal').hidden`)); !hidden {
			t.Errorf("the refusal banner still shows after a valid edit")
		}
	})

	t.Run("an edit saved meanwhile by someone else is a conflict, not overwritten", func(t *testing.T) {
		ctxb := context.Background()
		store := ddbloop.New(client, table)
		url := startDashboard(t, dashboardConfig{listen: "127.0.0.1:0", table: table})
		cdp(t, ctx, "load", chromedp.Navigate(url+"#orders"), chromedp.WaitVisible(cdpCSS("#f-setpoint")),
			cdpUntil(`document.getElementById('f-setpoint') !== null`, 10*time.Second))
		// Another operator (sluice params set) saves after the form loaded.
		attrs, err := store.ReadParams(ctxb, "orders")
		if err != nil {
			t.Fatal(err)
		}
		attrs["setpoint"] = 44.0
		if err := store.WriteParamsIf(ctxb, "orders", attrs, loop.ParamsVersion(attrs)); err != nil {
			t.Fatal(err)
		}
		cdp(t, ctx, "stale save", chromedp.SetValue(cdpCSS("#f-setpoint"), "66"), chromedp.Click(cdpCSS("#save")),
			cdpUntil(`document.getElementById('params-message').textContent.includes('someone else saved')`, 10*time.Second))
		if got := storedSetpoint(t, client, table); got != "44" {
			t.Fatalf("stored setpoint = %s after a save on a stale form; want the other operator's 44 kept", got)
		}
		cdp(t, ctx, "reload and save", chromedp.Reload(), chromedp.WaitVisible(cdpCSS("#f-setpoint")),
			chromedp.SetValue(cdpCSS("#f-setpoint"), "66"), chromedp.Click(cdpCSS("#save")),
			cdpUntil(`document.getElementById('params-message').textContent.startsWith('Saved')`, 10*time.Second))
		if got := storedSetpoint(t, client, table); got != "66" {
			t.Errorf("stored setpoint = %s after reloading and saving; want 66", got)
		}
	})

	t.Run("token required: a write without it is refused and nothing is written", func(t *testing.T) {
		url := startDashboard(t, dashboardConfig{listen: "127.0.0.1:0", table: table, token: "s3cret-token"})
		cdp(t, ctx, "load", chromedp.Navigate(url+"#orders"), chromedp.WaitVisible(cdpCSS("#f-token")),
			cdpUntil(`document.getElementById('f-setpoint') !== null`, 10*time.Second))
		before := storedSetpoint(t, client, table)
		cdp(t, ctx, "write without token", chromedp.SetValue(cdpCSS("#f-setpoint"), "61"), chromedp.Click(cdpCSS("#save")),
			cdpUntil(`document.getElementById('params-message').textContent.startsWith('Not saved (401)')`, 10*time.Second))
		if got := storedSetpoint(t, client, table); got != before {
			t.Fatalf("stored setpoint = %s after a write without the token; want %s unchanged", got, before)
		}
		cdp(t, ctx, "write with a wrong token", chromedp.SetValue(cdpCSS("#f-token"), "guess"), chromedp.Click(cdpCSS("#save")),
			cdpUntil(`document.getElementById('params-message').textContent.startsWith('Not saved (401)')`, 10*time.Second))
		if got := storedSetpoint(t, client, table); got != before {
			t.Fatalf("stored setpoint = %s after a write with a wrong token; want %s unchanged", got, before)
		}
		cdp(t, ctx, "write with the token", chromedp.SetValue(cdpCSS("#f-token"), "s3cret-token"), chromedp.Click(cdpCSS("#save")),
			cdpUntil(`document.getElementById('params-message').textContent.startsWith('Saved')`, 10*time.Second))
		if got := storedSetpoint(t, client, table); got != "61" {
			t.Errorf("stored setpoint = %s after a write with the token; want 61", got)
		}
	})
}

// TestBrowserSharedDemo: the destination's page stacks its members' allowed
// and processed rates.
func TestBrowserSharedDemo(t *testing.T) {
	ctx := newBrowser(t)
	c := dashboardConfig{listen: "127.0.0.1:0", demo: true, speed: 60, prefill: 90}
	c.traffic.Scenario = sharedScenario
	url := startDashboard(t, c)
	cdp(t, ctx, "load page", chromedp.Navigate(url+"#db"), chromedp.WaitVisible(cdpCSS("#chart-cpu")),
		cdpUntil(`document.getElementById('chart-members-rate') !== null && Number(document.getElementById('chart-members-rate').dataset.points) > 0`, 20*time.Second))
	for _, id := range []string{"chart-members-rate", "chart-members-consumed"} {
		points := cdpValue(t, ctx, "points of "+id, chromedp.Evaluate[int](fmt.Sprintf(`Number(document.getElementById(%q).dataset.points)`, id)))
		ink := cdpValue(t, ctx, "pixels of "+id, chromedp.Evaluate[int](fmt.Sprintf(`%s(%q)`, dashInkJS, id)))
		if points < 3*80 || ink < 200 {
			t.Errorf("%s: %d data points, %d coloured pixels; want the three members' lines (>= 240 points) and >= 200 pixels", id, points, ink)
		}
	}
	legend := cdpValue(t, ctx, "legend", chromedp.Evaluate[string](`document.getElementById('legend-members-rate').innerText`))
	for _, m := range []string{"orders", "billing", "reindex"} {
		if !strings.Contains(legend, m) {
			t.Errorf("members' legend %q lacks %s", legend, m)
		}
	}
	dashScreenshot(t, ctx, "dashboard-shared")
	// A member's header names its destination for the CPU: it has no
	// signal of its own, which is not a stale one.
	// WaitVisible before the poll: a poll right after a navigation can
	// run in the old document's context as it goes ("Cannot find context
	// with specified id", seen in CI).
	cdp(t, ctx, "member page", chromedp.Navigate("about:blank"), chromedp.Navigate(url+"#orders"), chromedp.WaitVisible(cdpCSS("#now")),
		cdpUntil(`document.getElementById('now').innerText.includes('at db')`, 20*time.Second))
	if now := cdpValue(t, ctx, "member header", chromedp.Evaluate[string](`document.getElementById('now').innerText`)); strings.Contains(now, "stale") {
		t.Errorf("member orders' header %q says stale; want its CPU at its destination db", now)
	}
}
