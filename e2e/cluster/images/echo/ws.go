package main

// A WebSocket echo (RFC 6455), written against the RFC with the standard library only: the
// opening handshake (section 4.2), frames (5.2) with client masking, fragmented messages
// (5.4), ping/pong (5.5.2-3) and the closing handshake (5.5.1, 7). Every message is sent back
// whole, with the opcode it came with.

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

const (
	wsGUID           = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
	wsMaxMessage     = 16 << 20 // larger messages are refused with 1009
	wsCloseWait      = 2 * time.Second
	opContinuation   = 0x0
	opText           = 0x1
	opBinary         = 0x2
	opClose          = 0x8
	opPing           = 0x9
	opPong           = 0xA
	closeNormal      = 1000
	closeGoingAway   = 1001
	closeProtocol    = 1002
	closeNoStatus    = 1005
	closeInvalidData = 1007
	closeTooBig      = 1009
)

var wsIDs atomic.Int64

// wsAccept is the Sec-WebSocket-Accept value for a Sec-WebSocket-Key (RFC 6455 4.2.2).
func wsAccept(key string) string {
	h := sha1.Sum([]byte(key + wsGUID))
	return base64.StdEncoding.EncodeToString(h[:])
}

// headerHasToken says whether a comma-separated header lists token (case-insensitively).
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

func (s *Server) serveWebSocket(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || !headerHasToken(r.Header, "Connection", "upgrade") ||
		!headerHasToken(r.Header, "Upgrade", "websocket") {
		writeText(w, http.StatusBadRequest, "a WebSocket handshake needs GET, Connection: Upgrade, Upgrade: websocket\n")
		return
	}
	if r.Header.Get("Sec-WebSocket-Version") != "13" {
		w.Header().Set("Sec-WebSocket-Version", "13")
		writeText(w, http.StatusUpgradeRequired, "Sec-WebSocket-Version: 13 only\n")
		return
	}
	key := r.Header.Get("Sec-WebSocket-Key")
	if raw, err := base64.StdEncoding.DecodeString(key); err != nil || len(raw) != 16 {
		writeText(w, http.StatusBadRequest, "Sec-WebSocket-Key must be 16 bytes in base64\n")
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		writeText(w, http.StatusInternalServerError, "connection cannot be taken over\n")
		return
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		return
	}
	_ = conn.SetDeadline(time.Time{}) // the server's timeouts are for HTTP, not for the socket
	resp := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Accept: " + wsAccept(key) + "\r\nX-Pod-Name: " + s.cfg.PodName + "\r\n\r\n"
	if _, err := rw.WriteString(resp); err != nil || rw.Flush() != nil {
		_ = conn.Close()
		return
	}
	c := &wsConn{id: wsIDs.Add(1), conn: conn, r: rw.Reader}
	if s.terminating.Load() && s.cfg.Grace <= 0 {
		_ = conn.Close()
		return
	}
	s.sockets.add(c)
	defer s.sockets.remove(c)
	c.serve()
}

type wsConn struct {
	id      int64
	conn    net.Conn
	r       *bufio.Reader
	writeMu sync.Mutex
	closing atomic.Bool // we sent a close frame
}

type wsFrame struct {
	fin     bool
	opcode  byte
	payload []byte
}

var errProtocol = errors.New("websocket protocol error")
var errTooBig = errors.New("websocket message too big")

// readFrame reads one client frame and unmasks it; limit bounds its payload.
func (c *wsConn) readFrame(limit int) (wsFrame, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return wsFrame{}, err
	}
	f := wsFrame{fin: hdr[0]&0x80 != 0, opcode: hdr[0] & 0x0F}
	if hdr[0]&0x70 != 0 { // RSV1-3: no extension was negotiated
		return f, errProtocol
	}
	if hdr[1]&0x80 == 0 { // clients must mask (5.1)
		return f, errProtocol
	}
	n := uint64(hdr[1] & 0x7F)
	switch n {
	case 126:
		var ext [2]byte
		if _, err := io.ReadFull(c.r, ext[:]); err != nil {
			return f, err
		}
		n = uint64(binary.BigEndian.Uint16(ext[:]))
	case 127:
		var ext [8]byte
		if _, err := io.ReadFull(c.r, ext[:]); err != nil {
			return f, err
		}
		n = binary.BigEndian.Uint64(ext[:])
		if n>>63 != 0 {
			return f, errProtocol
		}
	}
	if f.opcode >= opClose && (n > 125 || !f.fin) { // control frames (5.5)
		return f, errProtocol
	}
	if n > uint64(limit) {
		return f, errTooBig
	}
	var mask [4]byte
	if _, err := io.ReadFull(c.r, mask[:]); err != nil {
		return f, err
	}
	f.payload = make([]byte, n)
	if _, err := io.ReadFull(c.r, f.payload); err != nil {
		return f, err
	}
	for i := range f.payload {
		f.payload[i] ^= mask[i&3]
	}
	return f, nil
}

// writeFrame sends one unmasked, unfragmented frame (servers never mask).
func (c *wsConn) writeFrame(opcode byte, payload []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	hdr := make([]byte, 2, 10)
	hdr[0] = 0x80 | opcode
	switch n := len(payload); {
	case n <= 125:
		hdr[1] = byte(n)
	case n <= 0xFFFF:
		hdr[1] = 126
		hdr = binary.BigEndian.AppendUint16(hdr, uint16(n))
	default:
		hdr[1] = 127
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	_ = c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	bufs := net.Buffers{hdr, payload}
	_, err := bufs.WriteTo(c.conn)
	return err
}

func closePayload(code int, reason string) []byte {
	p := binary.BigEndian.AppendUint16(nil, uint16(code))
	return append(p, reason...)
}

// sendClose starts (or answers) the closing handshake once.
func (c *wsConn) sendClose(code int, reason string) {
	if c.closing.Swap(true) {
		return
	}
	_ = c.writeFrame(opClose, closePayload(code, reason))
	_ = c.conn.SetReadDeadline(time.Now().Add(wsCloseWait))
}

// goAway is the drain's close: 1001, then the client's close frame or a timeout ends serve().
func (c *wsConn) goAway() { c.sendClose(closeGoingAway, "server draining") }

func validCloseCode(code int) bool {
	switch {
	case code >= 3000 && code <= 4999:
		return true
	case code >= 1000 && code <= 1014:
		return code != 1004 && code != closeNoStatus && code != 1006
	}
	return false
}

// serve echoes messages until the closing handshake or an error.
func (c *wsConn) serve() {
	defer c.conn.Close()
	var msg []byte
	var msgOp byte // opcode of the message being assembled; 0 when none
	for {
		f, err := c.readFrame(wsMaxMessage - len(msg))
		switch {
		case errors.Is(err, errProtocol):
			c.sendClose(closeProtocol, "protocol error")
			return
		case errors.Is(err, errTooBig):
			c.sendClose(closeTooBig, "message too big")
			return
		case err != nil:
			return
		}
		switch f.opcode {
		case opPing:
			if err := c.writeFrame(opPong, f.payload); err != nil {
				return
			}
		case opPong:
		case opClose:
			code, reason := closeNormal, ""
			if len(f.payload) == 1 {
				c.sendClose(closeProtocol, "bad close frame")
				return
			}
			if len(f.payload) >= 2 {
				code = int(binary.BigEndian.Uint16(f.payload))
				reason = string(f.payload[2:])
				if !validCloseCode(code) || !utf8.ValidString(reason) {
					c.sendClose(closeProtocol, "bad close frame")
					return
				}
			}
			c.sendClose(code, "") // echo the code (7.1.5); a no-op if we started the close
			return
		case opText, opBinary:
			if msgOp != 0 {
				c.sendClose(closeProtocol, "new message inside a fragmented one")
				return
			}
			msgOp, msg = f.opcode, f.payload
		case opContinuation:
			if msgOp == 0 {
				c.sendClose(closeProtocol, "continuation without a message")
				return
			}
			msg = append(msg, f.payload...)
		default:
			c.sendClose(closeProtocol, "unknown opcode")
			return
		}
		if (f.opcode == opText || f.opcode == opBinary || f.opcode == opContinuation) && f.fin {
			if msgOp == opText && !utf8.Valid(msg) {
				c.sendClose(closeInvalidData, "text is not UTF-8")
				return
			}
			if !c.closing.Load() {
				if err := c.writeFrame(msgOp, msg); err != nil {
					return
				}
			}
			msg, msgOp = nil, 0
		}
	}
}
