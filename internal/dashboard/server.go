package dashboard

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/paramsaudit"
)

//go:embed assets
var assets embed.FS

// DefaultPoints is how many points the page asks for on load (six hours of
// one-minute ticks).
const DefaultPoints = 360

// maxPoints bounds one history request.
const maxPoints = 5000

// Config is what a Server needs. History, Params and Loops are required;
// without Writer the parameters are read-only.
type Config struct {
	History   HistoryReader
	Params    ParamsReader
	Writer    ParamsWriter
	Validator Validator
	Loops     LoopLister
	// Token, when not empty, must accompany every write, as an
	// "Authorization: Bearer <token>" header or a "token" form field.
	Token string
	// AllowedHosts are the host names (without port) requests may name in
	// their Host header; every other request is refused (421), so that a
	// page of another site whose name resolves to this server (DNS
	// rebinding) can neither read nor write. Empty: the loopback names
	// localhost, 127.0.0.1 and ::1.
	AllowedHosts []string
	// Title is shown in the page header, e.g. "demo" or the table name.
	Title string
	// Fields describe the PARAMS attributes for the form (LoopFields());
	// without them the form shows the item's attributes with the types
	// their values have.
	Fields []Field
	// Logger receives one line per refused or failed request, and one per
	// edit (who, when, what: paramsaudit); nil discards.
	Logger *slog.Logger
	// User is who the dashboard's edits are recorded as (PARAMS
	// updated_by); empty: "dashboard". UserHeader, when set, names a
	// request header that an authenticating proxy in front of the
	// dashboard sets to its user (X-Forwarded-User): its value, when
	// present, is recorded instead.
	User       string
	UserHeader string
}

// Server is the dashboard's HTTP handler: the embedded page and its JSON API.
type Server struct {
	cfg Config
	mux http.Handler
}

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.History == nil || cfg.Params == nil || cfg.Loops == nil {
		return nil, errors.New("dashboard: History, Params and Loops are required")
	}
	if cfg.Writer != nil && cfg.Validator == nil {
		return nil, errors.New("dashboard: a Writer needs a Validator: parameters are validated before they are written")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, fmt.Errorf("dashboard assets: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		b, _ := fs.ReadFile(static, "index.html")
		_, _ = w.Write(b)
	})
	mux.HandleFunc("GET /api/config", s.config)
	mux.HandleFunc("GET /api/loops", s.loops)
	mux.HandleFunc("GET /api/loops/{id}/history", s.history)
	mux.HandleFunc("GET /api/loops/{id}/params", s.params)
	mux.HandleFunc("POST /api/loops/{id}/params", s.setParams)
	s.mux = s.checkHost(http.NewCrossOriginProtection().Handler(securityHeaders(mux)))
	return s, nil
}

// checkHost refuses requests whose Host header names a host not in
// AllowedHosts (or, without any, not a loopback name).
func (s *Server) checkHost(h http.Handler) http.Handler {
	allowed := map[string]bool{}
	for _, a := range s.cfg.AllowedHosts {
		allowed[strings.ToLower(strings.Trim(a, "[]"))] = true
	}
	if len(allowed) == 0 {
		allowed = map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if !allowed[strings.ToLower(strings.Trim(host, "[]"))] {
			s.fail(w, r, http.StatusMisdirectedRequest, fmt.Errorf("host %q is not served here (allowed: %s)", truncateHost(r.Host), strings.Join(slices.Sorted(maps.Keys(allowed)), ", ")))
			return
		}
		h.ServeHTTP(w, r)
	})
}

func truncateHost(h string) string {
	if len(h) > 64 {
		return h[:64] + "..."
	}
	return h
}

// ServeHTTP serves the page and the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}

// CheckListen reports whether the dashboard may listen on addr with the given
// token: a loopback address needs none; any other address needs one, because
// anyone who reaches it could otherwise change a loop's parameters.
func CheckListen(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if isLoopback(host) || token != "" {
		return nil
	}
	return fmt.Errorf("listen address %q is not loopback: writes would be open to the network; set SLUICE_DASHBOARD_TOKEN or pass --token-file, or listen on 127.0.0.1", addr)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

type errorBody struct {
	Error string `json:"error"`
	// Refused is true when the parameters were invalid (the reason is in
	// Error), false for other failures.
	Refused bool `json:"refused,omitempty"`
	// Conflict is true when the parameters changed since the edit's
	// version: nothing was written.
	Conflict bool `json:"conflict,omitempty"`
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, code int, err error) {
	s.cfg.Logger.Warn("dashboard request", "method", r.Method, "path", r.URL.Path, "status", code, "err", err)
	writeJSON(w, code, errorBody{Error: err.Error()})
}

func (s *Server) config(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"title":          s.cfg.Title,
		"writable":       s.cfg.Writer != nil,
		"token_required": s.cfg.Token != "",
		"fields":         s.cfg.Fields,
	})
}

func (s *Server) loops(w http.ResponseWriter, r *http.Request) {
	ids, err := s.cfg.Loops.Loops(r.Context())
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	if ids == nil {
		ids = []string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"loops": ids})
}

// history serves GET /api/loops/{id}/history?since=<unix ms>&limit=<n>:
// without since, the newest limit points; with it, the points after it.
func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	q := r.URL.Query()
	limit := DefaultPoints
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			s.fail(w, r, http.StatusBadRequest, fmt.Errorf("limit %q: want a positive integer", v))
			return
		}
		limit = min(n, maxPoints)
	}
	var (
		ps  []Point
		err error
	)
	if v := q.Get("since"); v != "" {
		ms, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil {
			s.fail(w, r, http.StatusBadRequest, fmt.Errorf("since %q: want unix milliseconds", v))
			return
		}
		ps, err = s.cfg.History.Since(r.Context(), id, time.UnixMilli(ms), limit)
	} else {
		ps, err = s.cfg.History.Last(r.Context(), id, limit)
	}
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	if ps == nil {
		ps = []Point{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"loop": id, "points": ps})
}

func (s *Server) params(w http.ResponseWriter, r *http.Request) {
	st, err := s.cfg.Params.Params(r.Context(), r.PathValue("id"))
	if errors.Is(err, ErrNotFound) {
		s.fail(w, r, http.StatusNotFound, err)
		return
	}
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	if st.Params == nil {
		st.Params = Params{}
	}
	writeJSON(w, http.StatusOK, st)
}

// authorized reports whether r carries the token (constant-time compare).
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		got = r.PostFormValue("token")
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.Token)) == 1
}

// setParams serves POST /api/loops/{id}/params. The body is JSON,
// {"params": {...}}, or a form whose fields are the parameters. The edit is
// merged onto the stored parameters (a null value removes the attribute), validated with the controller's code,
// and written only when valid; a refusal answers 422 with its reason.
func (s *Server) setParams(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
		s.fail(w, r, http.StatusUnauthorized, errors.New("this dashboard requires a token for writes: nothing was written"))
		return
	}
	if s.cfg.Writer == nil {
		s.fail(w, r, http.StatusForbidden, errors.New("this dashboard is read-only"))
		return
	}
	edit, version, err := decodeEdit(r)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	id := r.PathValue("id")
	ctx := r.Context()
	cur, err := s.cfg.Params.Params(ctx, id)
	if err != nil && !errors.Is(err, ErrNotFound) {
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	if version != nil && *version != cur.Version {
		s.conflict(w, r, fmt.Errorf("%w (loaded at version %d, now %d)", ErrConflict, *version, cur.Version))
		return
	}
	next := Params{}
	maps.Copy(next, cur.Params)
	for k, v := range edit {
		if v == nil {
			delete(next, k) // an emptied field removes the attribute
		} else {
			next[k] = v
		}
	}
	if err := s.cfg.Validator.Validate(id, next); err != nil {
		s.cfg.Logger.Info("dashboard refused parameters", "loop", id, "reason", err)
		writeJSON(w, http.StatusUnprocessableEntity, errorBody{Error: err.Error(), Refused: true})
		return
	}
	who, at := s.user(r), time.Now()
	changes := paramsaudit.Stamp(cur.Params, next, who, at) // who, when, what (LoopParams keeps who)
	if err := s.write(ctx, id, next, cur.Version); errors.Is(err, ErrConflict) {
		s.conflict(w, r, err)
		return
	} else if err != nil {
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	paramsaudit.Log(s.cfg.Logger, id, who, at, changes)
	st, err := s.cfg.Params.Params(context.WithoutCancel(ctx), id)
	if err != nil {
		st = ParamsStatus{Params: next}
	}
	writeJSON(w, http.StatusOK, st)
}

// user is who makes the edit r asks for: the proxy's user header when
// configured and present, else the dashboard's user.
func (s *Server) user(r *http.Request) string {
	if h := s.cfg.UserHeader; h != "" {
		if u := strings.TrimSpace(r.Header.Get(h)); u != "" {
			return u
		}
	}
	if s.cfg.User != "" {
		return s.cfg.User
	}
	return "dashboard"
}

// write writes next, conditionally on the version the edit was merged
// onto when the Writer can.
func (s *Server) write(ctx context.Context, id string, next Params, version int64) error {
	if cw, ok := s.cfg.Writer.(ConditionalParamsWriter); ok {
		return cw.SetParamsIf(ctx, id, next, version)
	}
	return s.cfg.Writer.SetParams(ctx, id, next)
}

// conflict answers 409: the edit was not written.
func (s *Server) conflict(w http.ResponseWriter, r *http.Request, err error) {
	s.cfg.Logger.Info("dashboard edit conflict", "loop", r.PathValue("id"), "reason", err)
	writeJSON(w, http.StatusConflict, errorBody{Error: err.Error(), Conflict: true})
}

// decodeEdit reads the edited parameters from a JSON or form body, and the
// version of the parameters the edit was made on when the body gives it
// ("version"). Form values that parse as numbers become numbers, "true"
// and "false" booleans.
func decodeEdit(r *http.Request) (Params, *int64, error) {
	ct := r.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "application/json") {
		var body struct {
			Params  Params `json:"params"`
			Version *int64 `json:"version"`
		}
		dec := json.NewDecoder(r.Body)
		if err := dec.Decode(&body); err != nil {
			return nil, nil, fmt.Errorf("parameters: invalid JSON: %w", err)
		}
		if len(body.Params) == 0 {
			return nil, nil, errors.New(`parameters: the body must be {"params": {...}} with at least one field`)
		}
		return body.Params, body.Version, nil
	}
	if err := r.ParseForm(); err != nil {
		return nil, nil, fmt.Errorf("parameters: %w", err)
	}
	var version *int64
	if v := r.PostForm.Get("version"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("version %q: want the integer the parameters were read at", v)
		}
		version = &n
	}
	p := Params{}
	for k, vs := range r.PostForm {
		if k == "token" || k == "version" || len(vs) == 0 {
			continue
		}
		v := strings.TrimSpace(vs[0])
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			p[k] = f
		} else if b, err := strconv.ParseBool(v); err == nil && (v == "true" || v == "false") {
			p[k] = b
		} else {
			p[k] = v
		}
	}
	if len(p) == 0 {
		return nil, nil, errors.New("parameters: the form has no fields")
	}
	return p, version, nil
}
