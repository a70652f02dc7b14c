// A minimal gRPC unary backend for bench/h2.sh: HTTP/2 with prior knowledge (cleartext), the
// Go standard library only. Every POST answers one gRPC message (the request's own message
// echoed, or a fixed one) with grpc-status 0 in the trailers, as a gRPC server does. It is not
// a general gRPC server: it is the cheapest correct peer for measuring the proxies in front of
// it (nginx's grpc_pass and tidegate's backend-protocol GRPC).
package main

import (
	"encoding/binary"
	"flag"
	"io"
	"log"
	"net/http"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:19310", "address")
	flag.Parse()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || len(body) < 5 || int(binary.BigEndian.Uint32(body[1:5])) != len(body)-5 {
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Grpc-Status", "13")
			w.Header().Set("Grpc-Message", "bad message framing")
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
		w.WriteHeader(http.StatusOK)
		w.Write(body) // the same framed message back
		w.Header().Set("Grpc-Status", "0")
		w.Header().Set("Grpc-Message", "")
	})
	server := &http.Server{Addr: *listen, Handler: handler}
	server.Protocols = new(http.Protocols)
	server.Protocols.SetUnencryptedHTTP2(true)
	server.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 1000}
	log.Fatal(server.ListenAndServe())
}
