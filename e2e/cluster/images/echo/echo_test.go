package main

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func testServer(t *testing.T, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	s := NewServer(cfg)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

func get(t *testing.T, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func TestConfigFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    Config
		wantErr bool
	}{
		{name: "defaults", env: map[string]string{"POD_NAME": "p"},
			want: Config{Port: 8080, PodName: "p", Drain: 5 * time.Second}},
		{name: "all set", env: map[string]string{"PORT": "9000", "POD_NAME": "echo-1", "POD_IP": "198.18.0.5",
			"BODY_SIZE": "4096", "GRACE_SECONDS": "3", "DRAIN_SECONDS": "1"},
			want: Config{Port: 9000, PodName: "echo-1", PodIP: "198.18.0.5", BodySize: 4096,
				Grace: 3 * time.Second, Drain: time.Second}},
		{name: "bad port", env: map[string]string{"PORT": "http"}, wantErr: true},
		{name: "negative grace", env: map[string]string{"GRACE_SECONDS": "-1"}, wantErr: true},
		{name: "body too big", env: map[string]string{"BODY_SIZE": "999999999999"}, wantErr: true},
		{name: "tls", env: map[string]string{"POD_NAME": "p", "TLS_PORT": "8443",
			"TLS_CERT_FILE": "/tls/tls.crt", "TLS_KEY_FILE": "/tls/tls.key"},
			want: Config{Port: 8080, PodName: "p", Drain: 5 * time.Second, TLSPort: 8443,
				TLSCert: "/tls/tls.crt", TLSKey: "/tls/tls.key"}},
		{name: "tls without a key", env: map[string]string{"TLS_PORT": "8443", "TLS_CERT_FILE": "/c"},
			wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"PORT", "POD_NAME", "POD_IP", "BODY_SIZE", "GRACE_SECONDS", "DRAIN_SECONDS",
				"TLS_PORT", "TLS_CERT_FILE", "TLS_KEY_FILE"} {
				t.Setenv(k, tc.env[k])
			}
			got, err := ConfigFromEnv()
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tc.wantErr)
			}
			if !tc.wantErr && got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestEchoAnswer(t *testing.T) {
	_, ts := testServer(t, Config{PodName: "echo-a", PodIP: "198.18.0.9"})
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/some/path?x=1", strings.NewReader("hello"))
	req.Host = "echo.example"
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	req.Header.Set("User-Agent", "echo-test")
	req.Header.Set("Accept-Language", "fr") // not reported
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a Answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("X-Pod-Name") != "echo-a" {
		t.Fatalf("status %d, X-Pod-Name %q", resp.StatusCode, resp.Header.Get("X-Pod-Name"))
	}
	want := Answer{Pod: "echo-a", PodIP: "198.18.0.9", Method: "POST", Path: "/some/path", Query: "x=1",
		Host: "echo.example", Proto: "HTTP/1.1", BodyBytes: 5}
	if a.Pod != want.Pod || a.PodIP != want.PodIP || a.Method != want.Method || a.Path != want.Path ||
		a.Query != want.Query || a.Host != want.Host || a.Proto != want.Proto || a.BodyBytes != want.BodyBytes {
		t.Fatalf("got %+v, want %+v", a, want)
	}
	if a.Headers["X-Forwarded-For"] != "203.0.113.7" || a.Headers["User-Agent"] != "echo-test" {
		t.Fatalf("headers %v", a.Headers)
	}
	if _, ok := a.Headers["Accept-Language"]; ok {
		t.Fatalf("unselected header reported: %v", a.Headers)
	}
}

func TestBodySize(t *testing.T) {
	_, ts := testServer(t, Config{PodName: "p", BodySize: 1000})
	for _, tc := range []struct {
		query string
		want  int
	}{
		{"", 1000},
		{"?size=5000", 5000},
		{"?size=100000", 100000},
		{"?size=3000000", 3000000}, // several pad chunks
		{"?size=0", -1},            // no padding: the bare answer
		{"?size=10", -1},           // smaller than the answer: the bare answer
	} {
		resp, body := get(t, ts.URL+"/"+tc.query)
		var a Answer
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatalf("%s: not JSON: %v", tc.query, err)
		}
		if tc.want >= 0 && len(body) != tc.want {
			t.Fatalf("%s: %d bytes, want %d", tc.query, len(body), tc.want)
		}
		if tc.want < 0 && a.Pad != "" {
			t.Fatalf("%s: padded (%d bytes)", tc.query, len(body))
		}
		if resp.ContentLength != int64(len(body)) {
			t.Fatalf("%s: Content-Length %d, body %d", tc.query, resp.ContentLength, len(body))
		}
	}
	for _, q := range []string{"?size=-1", "?size=abc", "?size=999999999", "?delay_ms=x", "?status=99"} {
		if resp, _ := get(t, ts.URL+"/"+q); resp.StatusCode != 400 {
			t.Fatalf("%s: status %d, want 400", q, resp.StatusCode)
		}
	}
	if resp, _ := get(t, ts.URL+"/?status=503"); resp.StatusCode != 503 {
		t.Fatalf("status=503 answered %d", resp.StatusCode)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	s, ts := testServer(t, Config{PodName: "p"})
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200} {
		if resp, _ := get(t, ts.URL+path); resp.StatusCode != want {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
	s.StartTerminating()
	if resp, _ := get(t, ts.URL+"/readyz"); resp.StatusCode != 503 {
		t.Fatalf("readyz while terminating: %d", resp.StatusCode)
	}
	if resp, _ := get(t, ts.URL+"/healthz"); resp.StatusCode != 200 {
		t.Fatalf("healthz while terminating: %d", resp.StatusCode)
	}
}

// runServer starts Run on a loopback port and returns its address, its signal channel and a
// channel closed when Run returns.
func runServer(t *testing.T, cfg Config) (string, chan os.Signal, chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sigs := make(chan os.Signal, 2)
	done := make(chan struct{})
	s := NewServer(cfg)
	go func() {
		defer close(done)
		_ = s.Run([]net.Listener{ln}, sigs, t.Logf)
	}()
	return ln.Addr().String(), sigs, done
}

func TestGracefulTermination(t *testing.T) {
	addr, sigs, done := runServer(t, Config{PodName: "p", Grace: 600 * time.Millisecond, Drain: 2 * time.Second})
	base := "http://" + addr
	// A slow request that is in flight when the drain starts must still be answered.
	slow := make(chan int, 1)
	go func() {
		resp, err := http.Get(base + "/?delay_ms=900")
		if err != nil {
			slow <- -1
			return
		}
		resp.Body.Close()
		slow <- resp.StatusCode
	}()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	sigs <- syscall.SIGTERM
	time.Sleep(100 * time.Millisecond)
	if resp, _ := get(t, base+"/readyz"); resp.StatusCode != 503 {
		t.Fatalf("readyz after SIGTERM: %d", resp.StatusCode)
	}
	if resp, _ := get(t, base+"/"); resp.StatusCode != 200 {
		t.Fatalf("echo during the grace period: %d", resp.StatusCode)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
	if el := time.Since(start); el < 600*time.Millisecond {
		t.Fatalf("returned after %v, before the grace period ended", el)
	}
	if code := <-slow; code != 200 {
		t.Fatalf("request in flight during the drain: %d", code)
	}
	if _, err := http.Get(base + "/"); err == nil {
		t.Fatal("still serving after the drain")
	}
}

func TestAbruptTermination(t *testing.T) {
	addr, sigs, done := runServer(t, Config{PodName: "p"})
	if resp, _ := get(t, "http://"+addr+"/"); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	start := time.Now()
	sigs <- syscall.SIGTERM
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("Run did not return at once")
	}
	if el := time.Since(start); el > 200*time.Millisecond {
		t.Fatalf("took %v", el)
	}
}

// A minimal client side of RFC 6455, for the tests.
type wsClient struct {
	conn net.Conn
	r    *bufio.Reader
}

func wsDial(t *testing.T, addr string) (*wsClient, *http.Response) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	raw := make([]byte, 16)
	_, _ = rand.Read(raw)
	key := base64.StdEncoding.EncodeToString(raw)
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", addr, key)
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 101 || resp.Header.Get("Sec-WebSocket-Accept") != wsAccept(key) {
		t.Fatalf("handshake: %s, accept %q", resp.Status, resp.Header.Get("Sec-WebSocket-Accept"))
	}
	return &wsClient{conn: conn, r: r}, resp
}

func (c *wsClient) send(t *testing.T, fin bool, opcode byte, payload []byte, masked bool) {
	t.Helper()
	var b bytes.Buffer
	first := opcode
	if fin {
		first |= 0x80
	}
	b.WriteByte(first)
	maskBit := byte(0)
	if masked {
		maskBit = 0x80
	}
	switch n := len(payload); {
	case n <= 125:
		b.WriteByte(maskBit | byte(n))
	case n <= 0xFFFF:
		b.WriteByte(maskBit | 126)
		_ = binary.Write(&b, binary.BigEndian, uint16(n))
	default:
		b.WriteByte(maskBit | 127)
		_ = binary.Write(&b, binary.BigEndian, uint64(n))
	}
	p := append([]byte(nil), payload...)
	if masked {
		mask := []byte{0x12, 0x34, 0x56, 0x78}
		b.Write(mask)
		for i := range p {
			p[i] ^= mask[i&3]
		}
	}
	b.Write(p)
	if _, err := c.conn.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
}

func (c *wsClient) recv(t *testing.T) (byte, []byte) {
	t.Helper()
	var hdr [2]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		t.Fatal(err)
	}
	if hdr[0]&0x80 == 0 || hdr[1]&0x80 != 0 {
		t.Fatalf("server frame fragmented or masked: %x", hdr)
	}
	n := uint64(hdr[1] & 0x7F)
	switch n {
	case 126:
		var e [2]byte
		_, _ = io.ReadFull(c.r, e[:])
		n = uint64(binary.BigEndian.Uint16(e[:]))
	case 127:
		var e [8]byte
		_, _ = io.ReadFull(c.r, e[:])
		n = binary.BigEndian.Uint64(e[:])
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(c.r, p); err != nil {
		t.Fatal(err)
	}
	return hdr[0] & 0x0F, p
}

func TestWebSocketAccept(t *testing.T) {
	// The example of RFC 6455 section 1.3.
	if got := wsAccept("dGhlIHNhbXBsZSBub25jZQ=="); got != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatal(got)
	}
}

func TestWebSocketEcho(t *testing.T) {
	_, ts := testServer(t, Config{PodName: "ws-pod"})
	c, resp := wsDial(t, ts.Listener.Addr().String())
	if resp.Header.Get("X-Pod-Name") != "ws-pod" {
		t.Fatalf("X-Pod-Name %q", resp.Header.Get("X-Pod-Name"))
	}
	big := bytes.Repeat([]byte{0xAB}, 70000) // a 64-bit length
	for _, m := range []struct {
		op      byte
		payload []byte
	}{{opText, []byte("hello")}, {opBinary, []byte{0, 1, 2, 255}}, {opText, bytes.Repeat([]byte("é"), 200)}, {opBinary, big}} {
		c.send(t, true, m.op, m.payload, true)
		op, p := c.recv(t)
		if op != m.op || !bytes.Equal(p, m.payload) {
			t.Fatalf("sent op %d (%d bytes), got op %d (%d bytes)", m.op, len(m.payload), op, len(p))
		}
	}
	// Fragmented, with a ping between the fragments (5.4 allows control frames there).
	c.send(t, false, opText, []byte("frag"), true)
	c.send(t, true, opPing, []byte("p1"), true)
	c.send(t, false, opContinuation, []byte("ment"), true)
	c.send(t, true, opContinuation, []byte("ed"), true)
	if op, p := c.recv(t); op != opPong || string(p) != "p1" {
		t.Fatalf("pong: op %d %q", op, p)
	}
	if op, p := c.recv(t); op != opText || string(p) != "fragmented" {
		t.Fatalf("fragmented: op %d %q", op, p)
	}
	c.send(t, true, opClose, closePayload(closeNormal, "bye"), true)
	op, p := c.recv(t)
	if op != opClose || binary.BigEndian.Uint16(p) != closeNormal {
		t.Fatalf("close: op %d %x", op, p)
	}
	if _, err := c.r.ReadByte(); err != io.EOF {
		t.Fatalf("connection still open after the close: %v", err)
	}
}

func TestWebSocketProtocolErrors(t *testing.T) {
	_, ts := testServer(t, Config{PodName: "p"})
	addr := ts.Listener.Addr().String()
	for _, tc := range []struct {
		name string
		send func(c *wsClient)
		code uint16
	}{
		{"unmasked", func(c *wsClient) { c.send(t, true, opText, []byte("x"), false) }, closeProtocol},
		{"bad utf-8", func(c *wsClient) { c.send(t, true, opText, []byte{0xff, 0xfe}, true) }, closeInvalidData},
		{"lone continuation", func(c *wsClient) { c.send(t, true, opContinuation, []byte("x"), true) }, closeProtocol},
		{"unknown opcode", func(c *wsClient) { c.send(t, true, 0x3, nil, true) }, closeProtocol},
		{"long ping", func(c *wsClient) { c.send(t, true, opPing, make([]byte, 126), true) }, closeProtocol},
		{"bad close code", func(c *wsClient) { c.send(t, true, opClose, closePayload(999, ""), true) }, closeProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := wsDial(t, addr)
			tc.send(c)
			op, p := c.recv(t)
			if op != opClose || len(p) < 2 || binary.BigEndian.Uint16(p) != tc.code {
				t.Fatalf("got op %d %x, want close %d", op, p, tc.code)
			}
		})
	}
}

func TestWebSocketHandshakeRefused(t *testing.T) {
	_, ts := testServer(t, Config{PodName: "p"})
	for _, tc := range []struct {
		headers map[string]string
		want    int
	}{
		{map[string]string{}, 400},
		{map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "8",
			"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}, 426},
		{map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
			"Sec-WebSocket-Key": "short"}, 400},
	} {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/ws", nil)
		for k, v := range tc.headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Fatalf("%v: %d, want %d", tc.headers, resp.StatusCode, tc.want)
		}
	}
}

func TestWebSocketClosedByDrain(t *testing.T) {
	addr, sigs, done := runServer(t, Config{PodName: "p", Grace: 200 * time.Millisecond, Drain: 2 * time.Second})
	c, _ := wsDial(t, addr)
	c.send(t, true, opText, []byte("before"), true)
	if _, p := c.recv(t); string(p) != "before" {
		t.Fatal(string(p))
	}
	sigs <- syscall.SIGTERM
	// During the grace period the socket still echoes.
	c.send(t, true, opText, []byte("during"), true)
	if _, p := c.recv(t); string(p) != "during" {
		t.Fatal(string(p))
	}
	op, p := c.recv(t)
	if op != opClose || binary.BigEndian.Uint16(p) != closeGoingAway {
		t.Fatalf("got op %d %x, want close 1001", op, p)
	}
	c.send(t, true, opClose, closePayload(closeGoingAway, ""), true)
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("Run did not return after the socket closed")
	}
}

// The scale test keeps 50 WebSockets open through the ingress: 50 at once, each echoing.
func TestFiftyWebSocketsAtOnce(t *testing.T) {
	_, ts := testServer(t, Config{PodName: "p"})
	addr := ts.Listener.Addr().String()
	clients := make([]*wsClient, 50)
	for i := range clients {
		clients[i], _ = wsDial(t, addr)
	}
	for round := 0; round < 3; round++ {
		for i, c := range clients {
			c.send(t, true, opText, []byte(fmt.Sprintf("socket %d round %d", i, round)), true)
		}
		for i, c := range clients {
			if _, p := c.recv(t); string(p) != fmt.Sprintf("socket %d round %d", i, round) {
				t.Fatalf("socket %d: %q", i, p)
			}
		}
	}
}

// selfSigned writes a self-signed P-256 certificate for "steady.example" and its key into dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "steady.example"},
		DNSNames: []string{"steady.example"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = dir+"/tls.crt", dir+"/tls.key"
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestTLSListenerServesTheSameAnswersOverTLS13(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	cfg := Config{Port: freePort(t), TLSPort: freePort(t), TLSCert: certFile, TLSKey: keyFile,
		PodName: "steady-1", BodySize: 1024, Drain: time.Second}
	lns, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(lns) != 2 {
		t.Fatalf("%d listeners, want 2", len(lns))
	}
	sigs := make(chan os.Signal, 2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = NewServer(cfg).Run(lns, sigs, t.Logf)
	}()
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "steady.example", MinVersion: tls.VersionTLS13},
	}}
	resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/floor", cfg.TLSPort))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(body) != 1024 || resp.TLS == nil || resp.TLS.Version != tls.VersionTLS13 {
		t.Fatalf("status %d, %d bytes, TLS %+v", resp.StatusCode, len(body), resp.TLS)
	}
	var a Answer
	if err := json.Unmarshal(body, &a); err != nil || a.Pod != "steady-1" || a.Path != "/floor" {
		t.Fatalf("answer %+v (%v)", a, err)
	}
	// The plain listener still answers.
	if resp, _ := get(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", cfg.Port)); resp.StatusCode != 200 {
		t.Fatalf("plain readyz: %d", resp.StatusCode)
	}
	sigs <- syscall.SIGTERM
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
}

func TestTLSListenerRefusesAMissingCertificate(t *testing.T) {
	_, err := Listen(Config{Port: freePort(t), TLSPort: freePort(t), TLSCert: "/nonexistent.crt", TLSKey: "/nonexistent.key"})
	if err == nil {
		t.Fatal("no error for a missing certificate")
	}
}
