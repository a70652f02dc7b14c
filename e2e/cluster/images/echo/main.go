// Command echo is the backend of Tidegate's cluster tests: it answers every path with who it is
// (pod name and IP) and what it was asked (method, path, host, selected headers) as JSON, padded
// to a chosen size; it has liveness and readiness endpoints, a WebSocket echo at /ws, and a
// SIGTERM behaviour chosen by the environment, so that tests can watch a pod drain.
//
// Environment:
//
//	PORT            listen port (8080)
//	POD_NAME        reported as "pod" (default: the host name)
//	POD_IP          reported as "pod_ip"
//	BODY_SIZE       pad every answer to this many bytes (0: no padding); ?size=N overrides it
//	GRACE_SECONDS   after SIGTERM: 0 exits at once (abrupt); N > 0 keeps serving N s with
//	                /readyz failing, then drains and exits (graceful). Default 0.
//	DRAIN_SECONDS   how long the drain waits for requests in flight (5)
//	TLS_PORT        also serve HTTPS (TLS 1.2 or 1.3, HTTP/1.1) on this port (0: off, the default)
//	TLS_CERT_FILE   the certificate chain (PEM) for TLS_PORT
//	TLS_KEY_FILE    its private key (PEM)
//
// Query parameters of the echo answer: size=N (body size), delay_ms=N (wait before answering),
// status=N (answer with this status).
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Limits, named so that a test knows where they stop.
const (
	maxBodySize       = 64 << 20 // the largest padded answer
	maxDelay          = 60 * time.Second
	maxRequestBody    = 64 << 20 // request bodies are read (and counted) up to this much
	readHeaderTimeout = 10 * time.Second
	padChunk          = 32 << 10
)

// Config is what the environment chose.
type Config struct {
	Port     int
	PodName  string
	PodIP    string
	BodySize int
	Grace    time.Duration
	Drain    time.Duration
	TLSPort  int // 0: no HTTPS listener
	TLSCert  string
	TLSKey   string
}

func envInt(name string, def, lo, hi int) (int, error) {
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s=%q: want an integer in [%d, %d]", name, v, lo, hi)
	}
	return n, nil
}

// ConfigFromEnv reads the environment; a malformed value is an error rather than a default.
func ConfigFromEnv() (Config, error) {
	var c Config
	var err error
	if c.Port, err = envInt("PORT", 8080, 0, 65535); err != nil {
		return c, err
	}
	if c.BodySize, err = envInt("BODY_SIZE", 0, 0, maxBodySize); err != nil {
		return c, err
	}
	grace, err := envInt("GRACE_SECONDS", 0, 0, 3600)
	if err != nil {
		return c, err
	}
	drain, err := envInt("DRAIN_SECONDS", 5, 0, 3600)
	if err != nil {
		return c, err
	}
	if c.TLSPort, err = envInt("TLS_PORT", 0, 0, 65535); err != nil {
		return c, err
	}
	c.TLSCert, c.TLSKey = os.Getenv("TLS_CERT_FILE"), os.Getenv("TLS_KEY_FILE")
	if c.TLSPort != 0 && (c.TLSCert == "" || c.TLSKey == "") {
		return c, errors.New("TLS_PORT needs TLS_CERT_FILE and TLS_KEY_FILE")
	}
	c.Grace = time.Duration(grace) * time.Second
	c.Drain = time.Duration(drain) * time.Second
	c.PodName = os.Getenv("POD_NAME")
	if c.PodName == "" {
		c.PodName, _ = os.Hostname()
	}
	c.PodIP = os.Getenv("POD_IP")
	return c, nil
}

// Server is the echo service: its handler and the state SIGTERM changes.
type Server struct {
	cfg         Config
	terminating atomic.Bool
	requests    atomic.Int64
	sockets     wsRegistry
}

func NewServer(cfg Config) *Server { return &Server{cfg: cfg} }

// StartTerminating makes /readyz fail from now on.
func (s *Server) StartTerminating() { s.terminating.Store(true) }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	switch r.URL.Path {
	case "/healthz":
		writeText(w, http.StatusOK, "ok\n")
	case "/readyz":
		if s.terminating.Load() {
			writeText(w, http.StatusServiceUnavailable, "terminating\n")
			return
		}
		writeText(w, http.StatusOK, "ready\n")
	case "/ws":
		s.serveWebSocket(w, r)
	default:
		s.serveEcho(w, r)
	}
}

func writeText(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// Headers reported in every answer, besides every X-* header.
var reportedHeaders = []string{
	"Accept", "Authorization", "Connection", "Content-Length", "Content-Type", "Cookie",
	"Forwarded", "Origin", "User-Agent", "Via",
}

// Answer is the JSON body of the echo answer; Pad comes last so that it can be streamed.
type Answer struct {
	Pod        string            `json:"pod"`
	PodIP      string            `json:"pod_ip"`
	Method     string            `json:"method"`
	Path       string            `json:"path"`
	Query      string            `json:"query"`
	Host       string            `json:"host"`
	Proto      string            `json:"proto"`
	RemoteAddr string            `json:"remote_addr"`
	Headers    map[string]string `json:"headers"`
	BodyBytes  int64             `json:"body_bytes"`
	Requests   int64             `json:"requests"`
	Pad        string            `json:"pad"`
}

func selectedHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for name, values := range h {
		if strings.HasPrefix(name, "X-") || containsFold(reportedHeaders, name) {
			out[name] = strings.Join(values, ", ")
		}
	}
	return out
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

func queryInt(r *http.Request, name string, def, hi int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > hi {
		return 0, fmt.Errorf("%s=%q: want an integer in [0, %d]", name, v, hi)
	}
	return n, nil
}

func (s *Server) serveEcho(w http.ResponseWriter, r *http.Request) {
	size, err := queryInt(r, "size", s.cfg.BodySize, maxBodySize)
	if err == nil {
		var delay, status int
		if delay, err = queryInt(r, "delay_ms", 0, int(maxDelay/time.Millisecond)); err == nil {
			if status, err = queryInt(r, "status", http.StatusOK, 599); err == nil && status < 200 {
				err = errors.New("status: want 200..599")
			}
			if err == nil {
				s.answer(w, r, size, time.Duration(delay)*time.Millisecond, status)
				return
			}
		}
	}
	writeText(w, http.StatusBadRequest, err.Error()+"\n")
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request, size int, delay time.Duration, status int) {
	n, _ := io.Copy(io.Discard, io.LimitReader(r.Body, maxRequestBody))
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	a := Answer{
		Pod: s.cfg.PodName, PodIP: s.cfg.PodIP, Method: r.Method, Path: r.URL.Path,
		Query: r.URL.RawQuery, Host: r.Host, Proto: r.Proto, RemoteAddr: r.RemoteAddr,
		Headers: selectedHeaders(r.Header), BodyBytes: n, Requests: s.requests.Load(),
	}
	body, err := json.Marshal(a) // ends in `"pad":""}`
	if err != nil {
		writeText(w, http.StatusInternalServerError, err.Error()+"\n")
		return
	}
	body = append(body, '\n')
	pad := size - len(body)
	if pad < 0 {
		pad = 0
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+pad))
	w.Header().Set("X-Pod-Name", s.cfg.PodName)
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	// The padding goes inside the empty "pad" string: the body stays valid JSON of exactly
	// `size` bytes, streamed in chunks rather than built in memory.
	tail := len(`"}` + "\n")
	if _, err := w.Write(body[:len(body)-tail]); err != nil {
		return
	}
	chunk := []byte(strings.Repeat("x", padChunk))
	for pad > 0 {
		k := min(pad, len(chunk))
		if _, err := w.Write(chunk[:k]); err != nil {
			return
		}
		pad -= k
	}
	_, _ = w.Write(body[len(body)-tail:])
}

// Listen opens the listeners the configuration asks for: plain HTTP on Port, and HTTPS on
// TLSPort when it is set (the scale test's noise floor reaches a pod over TLS 1.3, as the load
// reaches the ingress).
func Listen(cfg Config) ([]net.Listener, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(cfg.Port)))
	if err != nil {
		return nil, err
	}
	lns := []net.Listener{ln}
	if cfg.TLSPort != 0 {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			ln.Close()
			return nil, err
		}
		tln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(cfg.TLSPort)))
		if err != nil {
			ln.Close()
			return nil, err
		}
		lns = append(lns, tls.NewListener(tln, &tls.Config{
			Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
			NextProtos: []string{"http/1.1"},
		}))
	}
	return lns, nil
}

// Run serves on lns until a signal arrives on sigs, then follows the configured SIGTERM
// behaviour; it returns when the process should exit.
func (s *Server) Run(lns []net.Listener, sigs <-chan os.Signal, logf func(string, ...any)) error {
	srv := &http.Server{Handler: s, ReadHeaderTimeout: readHeaderTimeout}
	served := make(chan error, len(lns))
	for _, ln := range lns {
		go func() { served <- srv.Serve(ln) }()
	}
	select {
	case err := <-served:
		return err
	case sig := <-sigs:
		s.StartTerminating()
		if s.cfg.Grace <= 0 {
			logf("%v: exiting at once (GRACE_SECONDS=0)", sig)
			_ = srv.Close()
			s.sockets.closeAll(true)
			return nil
		}
		logf("%v: readyz fails from now on; serving %v more, then draining", sig, s.cfg.Grace)
	}
	select {
	case <-time.After(s.cfg.Grace):
	case sig := <-sigs:
		logf("%v again: draining now", sig)
	}
	logf("draining (up to %v)", s.cfg.Drain)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Drain)
	defer cancel()
	s.sockets.closeAll(false) // WebSockets are hijacked: Shutdown does not see them
	err := srv.Shutdown(ctx)
	s.sockets.wait(ctx)
	if err != nil {
		logf("drain: %v", err)
		_ = srv.Close()
	}
	logf("drained; exiting")
	return nil
}

func main() {
	cfg, err := ConfigFromEnv()
	if err != nil {
		log.Fatal(err)
	}
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	lns, err := Listen(cfg)
	if err != nil {
		log.Fatal(err)
	}
	addrs := make([]string, len(lns))
	for i, ln := range lns {
		addrs[i] = ln.Addr().String()
	}
	log.Printf("echo %s (%s) on %s: body size %d, grace %v, drain %v", cfg.PodName, cfg.PodIP,
		strings.Join(addrs, " and "), cfg.BodySize, cfg.Grace, cfg.Drain)
	if err := NewServer(cfg).Run(lns, sigs, log.Printf); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

// wsRegistry tracks open WebSockets, so that a drain can close them.
type wsRegistry struct {
	mu    sync.Mutex
	conns map[*wsConn]struct{}
	wg    sync.WaitGroup
}

func (g *wsRegistry) add(c *wsConn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conns == nil {
		g.conns = map[*wsConn]struct{}{}
	}
	g.conns[c] = struct{}{}
	g.wg.Add(1)
}

func (g *wsRegistry) remove(c *wsConn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.conns[c]; ok {
		delete(g.conns, c)
		g.wg.Done()
	}
}

// closeAll sends each socket a close frame (1001, going away) or, when abrupt, cuts it.
func (g *wsRegistry) closeAll(abrupt bool) {
	g.mu.Lock()
	conns := make([]*wsConn, 0, len(g.conns))
	for c := range g.conns {
		conns = append(conns, c)
	}
	g.mu.Unlock()
	sort.Slice(conns, func(i, j int) bool { return conns[i].id < conns[j].id })
	for _, c := range conns {
		if abrupt {
			_ = c.conn.Close()
		} else {
			c.goAway()
		}
	}
}

func (g *wsRegistry) wait(ctx context.Context) {
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		g.closeAll(true)
	}
}
