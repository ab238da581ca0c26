package chaos

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// SilentProxy is a TCP proxy to one address that can fall silent: while
// silent it accepts connections and never answers, and forwards nothing on
// the connections it holds (no RST, no FIN: what a dead NAT entry, a
// black-holed route or a frozen server look like). When the silence ends,
// every connection it held is closed; new ones are forwarded again.
type SilentProxy struct {
	ln     net.Listener
	target string
	silent atomic.Bool
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	// held counts the connections accepted while silent; requests the
	// requests begun while silent (on those, or on connections that were
	// idle: a client's pool reuses them).
	held, requests atomic.Int64
}

// StartSilentProxy listens on a free loopback port and forwards to target
// (host:port).
func StartSilentProxy(target string) (*SilentProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &SilentProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *SilentProxy) Addr() string { return p.ln.Addr().String() }

// Held returns how many connections were accepted while silent.
func (p *SilentProxy) Held() int64 { return p.held.Load() }

// Requests returns how many requests the clients began while silent: on
// a connection accepted meanwhile, or on one with no request pending (a
// client that timed out and tried again on a pooled connection opened
// before the silence). The proxy reads no protocol: on a connection, what
// the client sends after the server's last answer begins a request, and
// the rest of it (a body, a pipelined request) counts nothing. A client
// that waits on a silent connection for the whole silence begins none.
func (p *SilentProxy) Requests() int64 { return p.requests.Load() }

// SetSilent starts or ends the silence; ending it closes every connection
// held meanwhile.
func (p *SilentProxy) SetSilent(on bool) {
	p.silent.Store(on)
	if on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// Close stops the proxy and closes its connections.
func (p *SilentProxy) Close() {
	p.ln.Close()
	p.SetSilent(false)
}

func (p *SilentProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns[c] = struct{}{}
	p.mu.Unlock()
}

func (p *SilentProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.track(c)
		if p.silent.Load() {
			p.held.Add(1)
			p.requests.Add(1)
			continue // accepted, never read, never answered
		}
		go p.forward(c)
	}
}

func (p *SilentProxy) forward(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.track(up)
	// pending: the client sent something the server has not answered yet.
	var pending atomic.Bool
	go p.pipe(c, up, func() { pending.Store(false) })
	p.pipe(up, c, func() {
		if !pending.Swap(true) && p.silent.Load() {
			p.requests.Add(1)
		}
	})
}

// pipe copies src to dst, holding every chunk while the proxy is silent
// (the silence's end closes both); read is called at each chunk read,
// before it is held.
func (p *SilentProxy) pipe(dst, src net.Conn, read func()) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			read()
		}
		for n > 0 && p.silent.Load() {
			time.Sleep(20 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed connection: both ends close
		}
	}
}
