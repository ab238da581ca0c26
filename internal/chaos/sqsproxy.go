package chaos

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
)

// SQSProxy stands between a consumer and the SQS server (the JSON
// protocol the SDK speaks) and passes every request through, except the
// sends to a queue it is told to refuse: those are answered as SQS
// answers a send whose KMS key the caller may not use.
type SQSProxy struct {
	next *httputil.ReverseProxy
	mu   sync.Mutex
	// refused maps a queue URL to whether sends to it are refused.
	refused map[string]bool
	// Refusals counts the requests refused.
	refusals int
}

// NewSQSProxy returns a proxy to the SQS server at target.
func NewSQSProxy(target string) (*SQSProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	return &SQSProxy{next: httputil.NewSingleHostReverseProxy(u), refused: map[string]bool{}}, nil
}

// Refuse starts (on) or stops refusing the sends to queueURL.
func (p *SQSProxy) Refuse(queueURL string, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refused[queueURL] = on
}

// Refusals returns how many requests the proxy refused.
func (p *SQSProxy) Refusals() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refusals
}

// ServeHTTP refuses a SendMessage or SendMessageBatch to a refused queue;
// it passes everything else to the server.
func (p *SQSProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target := r.Header.Get("X-Amz-Target")
	if strings.HasSuffix(target, ".SendMessageBatch") || strings.HasSuffix(target, ".SendMessage") {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var in struct{ QueueUrl string }
		json.Unmarshal(body, &in)
		p.mu.Lock()
		refuse := p.refused[in.QueueUrl]
		if refuse {
			p.refusals++
		}
		p.mu.Unlock()
		if refuse {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.Header().Set("x-amzn-query-error", "KMS.AccessDeniedException;Sender")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"__type":"com.amazonaws.sqs#KmsAccessDenied","message":"The ciphertext refers to a customer master key that does not exist, does not exist in this region, or you are not allowed to access."}`)
			return
		}
	}
	p.next.ServeHTTP(w, r)
}
