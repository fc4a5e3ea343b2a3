// Command origin serves a directory over HTTP on a loopback port, for
// integration/bench.sh: a static Go server, as a cloud bucket's front end
// would be, with keep-alive. It prints its base URL on stdout, then serves
// until killed.
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: origin DIR")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("http://%s\n", ln.Addr())
	os.Stdout.Close()
	if err := http.Serve(ln, http.FileServer(http.Dir(os.Args[1]))); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
