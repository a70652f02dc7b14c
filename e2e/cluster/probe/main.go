// Command probe is what the cluster tests run inside a pod to look at the cluster from there:
//
//	probe dns NAME...                 resolves each name with the pod's resolver
//	probe get [-token-file F] [-ca-file F] URL
//	                                  one GET; prints the status line and the body
//
// It exits 0 when every lookup or the request succeeded (any HTTP status counts as an answer:
// the status is printed for the test to judge), 1 otherwise. Static, so that its image is the
// program alone.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe dns NAME... | probe get [flags] URL")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "dns":
		os.Exit(lookup(os.Args[2:]))
	case "get":
		os.Exit(get(os.Args[2:]))
	default:
		fmt.Fprintf(os.Stderr, "probe: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

func lookup(names []string) int {
	rc := 0
	for _, name := range names {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		addrs, err := net.DefaultResolver.LookupHost(ctx, name)
		cancel()
		if err != nil {
			fmt.Printf("%s error %v\n", name, err)
			rc = 1
			continue
		}
		fmt.Printf("%s %s\n", name, strings.Join(addrs, ","))
	}
	return rc
}

func get(args []string) int {
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	tokenFile := fs.String("token-file", "", "a bearer token to send, read from this file")
	caFile := fs.String("ca-file", "", "CA bundle that verifies the server")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: probe get [-token-file F] [-ca-file F] URL")
		return 2
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			fmt.Printf("error %v\n", err)
			return 1
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			fmt.Printf("error no certificate in %s\n", *caFile)
			return 1
		}
		tlsConfig.RootCAs = pool
	}
	req, err := http.NewRequest(http.MethodGet, fs.Arg(0), nil)
	if err != nil {
		fmt.Printf("error %v\n", err)
		return 1
	}
	if *tokenFile != "" {
		token, err := os.ReadFile(*tokenFile)
		if err != nil {
			fmt.Printf("error %v\n", err)
			return 1
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	}
	client := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Printf("error %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	fmt.Printf("status %d\n%s\n", resp.StatusCode, body)
	return 0
}
