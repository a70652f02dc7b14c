// Command load is the open-loop load generator of Tidegate's scale test (docs/benchmarks.md,
// "Scaling 2↔4 under load"): a constant request rate over a fixed set of keep-alive
// connections, plain or TLS, with every latency measured from the moment the request was due,
// not from when a connection was free to send it. A stall therefore shows as latency (the
// correction for coordinated omission that wrk2 makes) instead of as fewer requests.
//
// It speaks HTTP/1.1 itself over net/tls connections, with no automatic retry: a request that
// fails (refused, reset, closed before its response, a status other than the expected one) is
// an error, one that gets no response within -timeout is a timeout, as wrk2 counts them. Beside
// the load it can hold WebSockets open through the same address: each echoes a message every
// -ws-every and once at the end, and must never be cut.
//
// Output: a JSON summary on stdout (or -out), and with -latencies every request's latency in
// microseconds, one per line, in the order the requests were due.
package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type config struct {
	target     *url.URL
	connect    string
	tls        *tls.Config
	rate       int
	conns      int
	duration   time.Duration
	timeout    time.Duration
	wantStatus int
	ws         int
	wsTarget   *url.URL
	wsEvery    time.Duration
}

// result is one request's outcome; due is its index in the schedule.
type result struct {
	latency time.Duration
	err     string // "" when it succeeded
	timeout bool
	pod     string
}

func main() {
	var (
		target   = flag.String("url", "", "request URL (its host is the Host header and TLS name)")
		connect  = flag.String("connect", "", "host:port to connect to (default: the URL's)")
		caFile   = flag.String("ca", "", "PEM file of the CA that signed the server's certificate")
		rate     = flag.Int("rate", 1000, "requests per second")
		conns    = flag.Int("connections", 50, "keep-alive connections")
		duration = flag.Duration("duration", 60*time.Second, "how long the load runs")
		timeout  = flag.Duration("timeout", 5*time.Second, "a request without a response by then is a timeout")
		status   = flag.Int("status", 200, "the status every response must have")
		ws       = flag.Int("ws", 0, "WebSockets to hold open for the whole run")
		wsURL    = flag.String("ws-url", "", "WebSocket URL (ws:// or wss://; default: -url's host, path /ws)")
		wsEvery  = flag.Duration("ws-every", 10*time.Second, "each WebSocket echoes a message this often")
		out      = flag.String("out", "", "write the JSON summary here (default: stdout)")
		lats     = flag.String("latencies", "", "write every latency (µs, one per line) here")
	)
	flag.Parse()
	cfg, err := makeConfig(*target, *connect, *caFile, *wsURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(2)
	}
	if *rate < 1 || *conns < 1 || *duration <= 0 || *timeout <= 0 {
		fmt.Fprintln(os.Stderr, "load: -rate, -connections, -duration and -timeout must be positive")
		os.Exit(2)
	}
	cfg.rate, cfg.conns, cfg.duration, cfg.timeout = *rate, *conns, *duration, *timeout
	cfg.wantStatus, cfg.ws, cfg.wsEvery = *status, *ws, *wsEvery

	summary, latencies := run(cfg)
	if *lats != "" {
		var b bytes.Buffer
		for _, l := range latencies {
			fmt.Fprintf(&b, "%d\n", l.Microseconds())
		}
		if err := os.WriteFile(*lats, b.Bytes(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "load:", err)
			os.Exit(1)
		}
	}
	js, _ := json.MarshalIndent(summary, "", "  ")
	js = append(js, '\n')
	if *out != "" {
		if err := os.WriteFile(*out, js, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "load:", err)
			os.Exit(1)
		}
	} else {
		os.Stdout.Write(js)
	}
}

func makeConfig(target, connect, caFile, wsURL string) (*config, error) {
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("-url must be an http:// or https:// URL, got %q", target)
	}
	cfg := &config{target: u, connect: connect}
	if cfg.connect == "" {
		cfg.connect = hostPort(u)
	}
	if u.Scheme == "https" || strings.HasPrefix(wsURL, "wss:") {
		cfg.tls = &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS13}
		if caFile != "" {
			pem, err := os.ReadFile(caFile)
			if err != nil {
				return nil, err
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("no certificate in %s", caFile)
			}
			cfg.tls.RootCAs = pool
		}
	}
	if wsURL == "" {
		scheme := "ws"
		if u.Scheme == "https" {
			scheme = "wss"
		}
		wsURL = scheme + "://" + u.Host + "/ws"
	}
	if cfg.wsTarget, err = url.Parse(wsURL); err != nil ||
		(cfg.wsTarget.Scheme != "ws" && cfg.wsTarget.Scheme != "wss") {
		return nil, fmt.Errorf("-ws-url must be a ws:// or wss:// URL, got %q", wsURL)
	}
	return cfg, nil
}

func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" || u.Scheme == "wss" {
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

func dial(cfg *config, secure bool, deadline time.Time) (net.Conn, error) {
	d := net.Dialer{Deadline: deadline}
	c, err := d.Dial("tcp", cfg.connect)
	if err != nil {
		return nil, err
	}
	if !secure {
		return c, nil
	}
	tc := tls.Client(c, cfg.tls)
	tc.SetDeadline(deadline)
	if err := tc.Handshake(); err != nil {
		c.Close()
		return nil, err
	}
	return tc, nil
}

// summary is the JSON the test reads.
type summary struct {
	Target      string             `json:"target"`
	Rate        int                `json:"rate"`
	Connections int                `json:"connections"`
	Seconds     float64            `json:"seconds"`
	Requests    int                `json:"requests"`
	OK          int                `json:"ok"`
	Errors      int                `json:"errors"`
	Timeouts    int                `json:"timeouts"`
	ErrorKinds  map[string]int     `json:"error_kinds"`
	Percentiles map[string]float64 `json:"percentiles_ms"`
	MaxMs       float64            `json:"max_ms"`
	Pods        map[string]int     `json:"pods"`
	WebSockets  *wsSummary         `json:"websockets,omitempty"`
	// How late the scheduler itself sent (it shares the machine with what it measures).
	MaxSendLagMs float64 `json:"max_send_lag_ms"`
}

type wsSummary struct {
	Opened   int      `json:"opened"`
	Alive    int      `json:"alive_at_end"`
	Echoes   int      `json:"echoes"`
	Failures []string `json:"failures"`
}

var percentiles = []struct {
	name string
	p    float64
}{{"50", 50}, {"90", 90}, {"99", 99}, {"99.9", 99.9}, {"99.99", 99.99}, {"99.999", 99.999}}

func run(cfg *config) (summary, []time.Duration) {
	total := int(cfg.duration.Seconds() * float64(cfg.rate))
	interval := time.Second / time.Duration(cfg.rate)
	results := make([]result, total)
	due := make(chan int, total)
	start := time.Now().Add(200 * time.Millisecond)
	end := start.Add(cfg.duration)

	var wsWait sync.WaitGroup
	var wsRes *wsSummary
	if cfg.ws > 0 {
		wsRes = &wsSummary{Failures: []string{}}
		var mu sync.Mutex
		for i := 0; i < cfg.ws; i++ {
			wsWait.Add(1)
			go func(i int) {
				defer wsWait.Done()
				echoes, err := holdWebSocket(cfg, i, end)
				mu.Lock()
				defer mu.Unlock()
				wsRes.Echoes += echoes
				if echoes > 0 {
					wsRes.Opened++
				}
				if err != nil {
					wsRes.Failures = append(wsRes.Failures, fmt.Sprintf("websocket %d: %v", i, err))
				} else {
					wsRes.Alive++
				}
			}(i)
		}
	}

	var workers sync.WaitGroup
	for i := 0; i < cfg.conns; i++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			w := worker{cfg: cfg}
			for i := range due {
				results[i] = w.do(start.Add(time.Duration(i) * interval))
			}
			w.close()
		}()
	}
	var maxLag time.Duration
	for i := 0; i < total; i++ {
		at := start.Add(time.Duration(i) * interval)
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		} else if -d > maxLag {
			maxLag = -d
		}
		due <- i
	}
	close(due)
	workers.Wait()
	elapsed := time.Since(start)
	wsWait.Wait()

	s := summary{Target: cfg.target.String(), Rate: cfg.rate, Connections: cfg.conns,
		Seconds: elapsed.Seconds(), Requests: total, ErrorKinds: map[string]int{},
		Percentiles: map[string]float64{}, Pods: map[string]int{}, WebSockets: wsRes,
		MaxSendLagMs: ms(maxLag)}
	latencies := make([]time.Duration, total)
	for i, r := range results {
		latencies[i] = r.latency
		switch {
		case r.timeout:
			s.Timeouts++
		case r.err != "":
			s.Errors++
			s.ErrorKinds[r.err]++
		default:
			s.OK++
			if r.pod != "" {
				s.Pods[r.pod]++
			}
		}
	}
	sorted := append([]time.Duration(nil), latencies...)
	sort.Slice(sorted, func(a, b int) bool { return sorted[a] < sorted[b] })
	for _, p := range percentiles {
		s.Percentiles[p.name] = ms(percentile(sorted, p.p))
	}
	s.MaxMs = ms(sorted[len(sorted)-1])
	return s, latencies
}

// percentile: the smallest latency at or above which lie (100-p)% of the requests
// (nearest rank), as HdrHistogram and wrk2 report it.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(p/100*float64(len(sorted)) + 0.999999)
	if rank < 1 {
		rank = 1
	}
	if rank > len(sorted) {
		rank = len(sorted)
	}
	return sorted[rank-1]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// worker owns one keep-alive connection; it reconnects after any failure or a
// `Connection: close`, and the new connection's set-up counts in the request's latency.
type worker struct {
	cfg  *config
	conn net.Conn
	rd   *bufio.Reader
	body []byte
}

func (w *worker) close() {
	if w.conn != nil {
		w.conn.Close()
		w.conn = nil
	}
}

var podKey = []byte(`"pod":"`)

func (w *worker) do(due time.Time) result {
	deadline := time.Now().Add(w.cfg.timeout)
	r := w.exchange(deadline)
	r.latency = time.Since(due)
	if r.err != "" || r.timeout {
		w.close()
	}
	return r
}

func (w *worker) exchange(deadline time.Time) result {
	if w.conn == nil {
		c, err := dial(w.cfg, w.cfg.target.Scheme == "https", deadline)
		if err != nil {
			return failure("connect", err)
		}
		w.conn, w.rd = c, bufio.NewReaderSize(c, 16<<10)
	}
	w.conn.SetDeadline(deadline)
	req := "GET " + w.cfg.target.RequestURI() + " HTTP/1.1\r\nHost: " + w.cfg.target.Host +
		"\r\nUser-Agent: tidegate-load\r\n\r\n"
	if _, err := io.WriteString(w.conn, req); err != nil {
		return failure("write", err)
	}
	res, err := http.ReadResponse(w.rd, nil)
	if err != nil {
		return failure("read", err)
	}
	w.body = w.body[:0]
	buf := bytes.NewBuffer(w.body)
	_, err = io.Copy(buf, res.Body)
	res.Body.Close()
	w.body = buf.Bytes()
	if err != nil {
		return failure("read body", err)
	}
	if res.Close {
		w.close()
	}
	if res.StatusCode != w.cfg.wantStatus {
		return result{err: fmt.Sprintf("status %d", res.StatusCode)}
	}
	out := result{}
	if i := bytes.Index(w.body, podKey); i >= 0 {
		rest := w.body[i+len(podKey):]
		if j := bytes.IndexByte(rest, '"'); j >= 0 {
			out.pod = string(rest[:j])
		}
	}
	return out
}

func failure(stage string, err error) result {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return result{timeout: true, err: stage + ": timeout"}
	}
	msg := err.Error()
	// Keep the kind, not the addresses: "read: connection reset by peer", "read: EOF".
	for _, kind := range []string{"connection refused", "connection reset by peer", "broken pipe",
		"EOF", "no route to host", "tls:"} {
		if strings.Contains(msg, kind) {
			return result{err: stage + ": " + kind}
		}
	}
	return result{err: stage + ": " + msg}
}

// --- WebSockets (RFC 6455, client side: masked frames, text messages) ---

func holdWebSocket(cfg *config, i int, end time.Time) (echoes int, err error) {
	u := cfg.wsTarget
	conn, err := dial(cfg, u.Scheme == "wss", time.Now().Add(10*time.Second))
	if err != nil {
		return 0, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	keyBytes := make([]byte, 16)
	rand.Read(keyBytes)
	key := base64.StdEncoding.EncodeToString(keyBytes)
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", u.RequestURI(), u.Host, key)
	rd := bufio.NewReader(conn)
	res, err := http.ReadResponse(rd, nil)
	if err != nil {
		return 0, fmt.Errorf("handshake: %w", err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		return 0, fmt.Errorf("handshake: status %d", res.StatusCode)
	}
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	if res.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(h[:]) {
		return 0, errors.New("handshake: wrong Sec-WebSocket-Accept")
	}
	var n atomic.Int32
	echo := func(tag string) error {
		msg := fmt.Sprintf("tidegate websocket %d %s %d", i, tag, n.Add(1))
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		if err := writeFrame(conn, msg); err != nil {
			return fmt.Errorf("%s: write: %w", tag, err)
		}
		got, err := readFrame(rd)
		if err != nil {
			return fmt.Errorf("%s: read: %w", tag, err)
		}
		if got != msg {
			return fmt.Errorf("%s: echo %q, want %q", tag, got, msg)
		}
		echoes++
		return nil
	}
	if err := echo("open"); err != nil {
		return echoes, err
	}
	for {
		next := time.Now().Add(cfg.wsEvery)
		last := !next.Before(end)
		if last {
			next = end
		}
		// Between echoes nothing may arrive: a read returning early is a cut connection.
		conn.SetReadDeadline(next)
		if _, err := rd.Peek(1); err == nil {
			return echoes, errors.New("unexpected data between echoes")
		} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			return echoes, fmt.Errorf("cut while idle: %w", err)
		}
		tag := "during"
		if last {
			tag = "end"
		}
		if err := echo(tag); err != nil {
			return echoes, err
		}
		if last {
			return echoes, nil
		}
	}
}

func writeFrame(w io.Writer, msg string) error {
	var hdr [14]byte
	hdr[0] = 0x80 | 0x1 // FIN, text
	n := 2
	switch l := len(msg); {
	case l < 126:
		hdr[1] = 0x80 | byte(l)
	case l < 1<<16:
		hdr[1] = 0x80 | 126
		binary.BigEndian.PutUint16(hdr[2:], uint16(l))
		n = 4
	default:
		hdr[1] = 0x80 | 127
		binary.BigEndian.PutUint64(hdr[2:], uint64(l))
		n = 10
	}
	mask := hdr[n : n+4]
	rand.Read(mask)
	n += 4
	payload := []byte(msg)
	for j := range payload {
		payload[j] ^= mask[j%4]
	}
	_, err := w.Write(append(hdr[:n:n], payload...))
	return err
}

// readFrame reads one unfragmented, unmasked text frame (what the echo sends back).
func readFrame(r *bufio.Reader) (string, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return "", err
	}
	if h[0]&0x0f == 0x8 {
		return "", errors.New("close frame from the server")
	}
	if h[0] != 0x81 || h[1]&0x80 != 0 {
		return "", fmt.Errorf("unexpected frame header %x", h)
	}
	l := uint64(h[1] & 0x7f)
	switch l {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return "", err
		}
		l = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return "", err
		}
		l = binary.BigEndian.Uint64(b[:])
	}
	if l > 1<<20 {
		return "", fmt.Errorf("frame of %d bytes", l)
	}
	p := make([]byte, l)
	if _, err := io.ReadFull(r, p); err != nil {
		return "", err
	}
	return string(p), nil
}
