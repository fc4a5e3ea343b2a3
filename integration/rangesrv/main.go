// Command rangesrv serves a directory over HTTP for the benchmark scripts
// (integration/bench_object.sh): rangesrv ADDR DIR [MIBPS DELAYMS]. It is
// http.FileServer (Range honoured), each response optionally capped at
// MIBPS MiB/s and its first byte DELAYMS late, as an object store bounds
// one connection.
package main

import (
	"net/http"
	"os"
	"strconv"
	"time"
)

type slow struct {
	http.ResponseWriter
	rate  float64
	start time.Time
	n     int
}

func (s *slow) Write(p []byte) (int, error) {
	total := 0
	for len(p) > 0 {
		k := min(len(p), 64<<10)
		n, err := s.ResponseWriter.Write(p[:k])
		s.n += n
		total += n
		if err != nil {
			return total, err
		}
		p = p[k:]
		if d := time.Duration(float64(s.n)/s.rate*1e9) - time.Since(s.start); d > 0 {
			time.Sleep(d)
		}
	}
	return total, nil
}

func main() {
	fsrv := http.FileServer(http.Dir(os.Args[2]))
	if len(os.Args) < 5 {
		http.ListenAndServe(os.Args[1], fsrv)
		return
	}
	mibps, _ := strconv.ParseFloat(os.Args[3], 64)
	delay, _ := strconv.Atoi(os.Args[4])
	http.ListenAndServe(os.Args[1], http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Duration(delay) * time.Millisecond)
		fsrv.ServeHTTP(&slow{ResponseWriter: w, rate: mibps * (1 << 20), start: time.Now()}, r)
	}))
}
