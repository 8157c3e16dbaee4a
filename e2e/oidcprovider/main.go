// Command oidcprovider is the OpenID provider of the end-to-end tests (see
// package idp): it listens on -addr, prints "listening on URL" once it
// serves, and runs until killed.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/musterhq/muster/e2e/oidcprovider/idp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	users := flag.String("users", "", "the users file (JSON)")
	clientID := flag.String("client-id", "muster", "the one client")
	redirects := flag.String("redirect", "", "comma list of the client's redirect URIs")
	ttl := flag.Duration("id-token-ttl", time.Hour, "lifetime of ID tokens")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String()
	h, err := idp.New(idp.Config{Issuer: issuer, UsersFile: *users, ClientID: *clientID,
		RedirectURIs: strings.Split(*redirects, ","), IDTokenTTL: *ttl})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stdout, "listening on %s\n", issuer)
	log.Fatal((&http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}).Serve(ln))
}
