// Command wsload is the WebSocket load client of bench/websocket.sh. It talks only to the URL
// it is given (the script passes ws://127.0.0.1:PORT/...), and every mode is bounded in
// connections and in time. Three modes:
//
//	wsload echo -url URL -c 256 -size 64 -warmup 3s -duration 10s
//	    c connections, each with one text message of size bytes in flight: send, read the echo,
//	    check it, send again (frames written and read directly on the socket, see echo). Prints RESULT mps=... msgs=... errors=... client_cpu=...
//	    (client_cpu: this process's CPU seconds per wall second in the measured window).
//	wsload broadcast -url URL -c 10000 -rounds 5 -size 64
//	    c connections; then, rounds+1 times, connection 0 sends "broadcast <seq> ..." and the
//	    server sends it to every connection; a round lasts from that send until all c
//	    connections have read it. The first round is a warm-up that also shows every
//	    connection is registered. Prints ROUND lines and RESULT median_ms=... errors=...
//	wsload idle -url URL -c 10000 -hold 300s
//	    c connections that send nothing (they answer the server's pings); prints "OPEN c" once
//	    all are open, then holds them until SIGTERM or -hold, closes them and prints CLOSED.
//
// Exit status: 0 when every connection opened and every message came back as sent, 1 when
// any failed, 2 for bad usage.
package main

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math/rand"
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

	"github.com/gorilla/websocket"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	mode, args := os.Args[1], os.Args[2:]
	if mode != "echo" && mode != "broadcast" && mode != "idle" {
		usage()
	}
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	url := fs.String("url", "", "ws://127.0.0.1:PORT/path")
	conns := fs.Int("c", 256, "connections (1..20000)")
	size := fs.Int("size", 64, "message size in bytes (32..65536)")
	dialers := fs.Int("dialers", 128, "handshakes in flight while connecting")
	warmup := fs.Duration("warmup", 3*time.Second, "echo: unmeasured time first")
	duration := fs.Duration("duration", 10*time.Second, "echo: measured time")
	rounds := fs.Int("rounds", 5, "broadcast: measured rounds (1..100)")
	timeout := fs.Duration("timeout", 30*time.Second, "broadcast: longest round; any mode: longest handshake")
	hold := fs.Duration("hold", 300*time.Second, "idle: longest hold")
	_ = fs.Parse(args)
	if !strings.HasPrefix(*url, "ws://127.0.0.1:") {
		fail(2, "-url must be ws://127.0.0.1:PORT/...")
	}
	if *conns < 1 || *conns > 20000 || *size < 32 || *size > 65536 || *rounds < 1 || *rounds > 100 ||
		*dialers < 1 || *warmup < 0 || *duration <= 0 || *duration > 10*time.Minute ||
		*warmup > 10*time.Minute || *hold > time.Hour || *timeout > 10*time.Minute {
		fail(2, "an option is out of range")
	}
	cs, err := dialAll(*url, *conns, *dialers, *timeout)
	if err != nil {
		fail(1, err.Error())
	}
	code := 2
	switch mode {
	case "echo":
		code = echo(cs, *size, *warmup, *duration)
	case "broadcast":
		code = broadcast(cs, *size, *rounds, *timeout)
	case "idle":
		code = idle(cs, *hold)
	}
	closeAll(cs)
	os.Exit(code)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: wsload echo|broadcast|idle -url ws://127.0.0.1:PORT/path [options]")
	os.Exit(2)
}

func fail(code int, msg string) {
	fmt.Fprintln(os.Stderr, "wsload:", msg)
	os.Exit(code)
}

// dialAll opens n connections, at most `parallel` handshakes at a time (the server's accept
// backlog is finite), and fails on the first that cannot open.
func dialAll(url string, n, parallel int, timeout time.Duration) ([]*websocket.Conn, error) {
	d := websocket.Dialer{HandshakeTimeout: timeout, ReadBufferSize: 1024, WriteBufferSize: 1024}
	cs := make([]*websocket.Conn, n)
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i := range cs {
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			c, resp, err := d.Dial(url, http.Header{})
			if err != nil {
				if resp != nil {
					err = fmt.Errorf("%v (HTTP %d)", err, resp.StatusCode)
				}
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("connection %d: %v", i, err)
				}
				mu.Unlock()
				return
			}
			cs[i] = c
		}(i)
	}
	wg.Wait()
	if first != nil {
		closeAll(cs)
		return nil, first
	}
	return cs, nil
}

func closeAll(cs []*websocket.Conn) {
	for _, c := range cs {
		if c != nil {
			_ = c.Close()
		}
	}
}

func payload(size int, prefix string) []byte {
	b := bytes.Repeat([]byte("x"), size)
	copy(b, prefix)
	return b
}

// cpuSeconds is this process's user + system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// echo keeps one message in flight per connection. After the handshake it writes each
// connection's frame, masked once beforehand, and reads the echo straight off the socket:
// the client's work per message is two system calls and a comparison, so that on its one
// core it can outrun the server it measures.
func echo(cs []*websocket.Conn, size int, warmup, duration time.Duration) int {
	var count, errs atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i, c := range cs {
		msg := payload(size, "echo "+strconv.Itoa(i)+" ")
		wg.Add(1)
		go func(nc net.Conn, out, want []byte) {
			defer wg.Done()
			in := make([]byte, len(want))
			for !stop.Load() {
				if _, err := nc.Write(out); err != nil {
					errs.Add(1)
					return
				}
				if _, err := io.ReadFull(nc, in); err != nil || !bytes.Equal(in, want) {
					errs.Add(1)
					return
				}
				count.Add(1)
			}
		}(c.NetConn(), clientFrame(msg), serverFrame(msg))
	}
	time.Sleep(warmup)
	n0, cpu0, t0 := count.Load(), cpuSeconds(), time.Now()
	time.Sleep(duration)
	n1, cpu1, t1 := count.Load(), cpuSeconds(), time.Now()
	stop.Store(true)
	// each goroutine ends after its message in flight comes back
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		fmt.Fprintln(os.Stderr, "wsload: some echoes did not come back within 10 s")
		errs.Add(1)
	}
	secs := t1.Sub(t0).Seconds()
	fmt.Printf("RESULT mps=%.0f msgs=%d errors=%d client_cpu=%.2f\n",
		float64(n1-n0)/secs, n1-n0, errs.Load(), (cpu1-cpu0)/secs)
	if errs.Load() > 0 {
		return 1
	}
	return 0
}

// frameHead is the head of a final text frame of n bytes (RFC 6455 5.2), mask bit and key aside.
func frameHead(n int) []byte {
	switch {
	case n < 126:
		return []byte{0x81, byte(n)}
	case n < 65536:
		return []byte{0x81, 126, byte(n >> 8), byte(n)}
	default:
		h := []byte{0x81, 127, 0, 0, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint64(h[2:], uint64(n))
		return h
	}
}

// clientFrame is msg as a client sends it: masked, with a key drawn once per connection.
func clientFrame(msg []byte) []byte {
	f := frameHead(len(msg))
	f[1] |= 0x80
	key := []byte{byte(rand.Intn(256)), byte(rand.Intn(256)), byte(rand.Intn(256)), byte(rand.Intn(256))}
	f = append(f, key...)
	for i, b := range msg {
		f = append(f, b^key[i%4])
	}
	return f
}

// serverFrame is msg as the server sends it back: unmasked.
func serverFrame(msg []byte) []byte {
	return append(frameHead(len(msg)), msg...)
}

func broadcast(cs []*websocket.Conn, size, rounds int, timeout time.Duration) int {
	n := int64(len(cs))
	var round atomic.Int64 // the round being received
	var got atomic.Int64   // connections that have read it
	var errs atomic.Int64
	done := make(chan time.Time, 1)
	for _, c := range cs {
		go func(c *websocket.Conn) {
			for {
				t, msg, err := c.ReadMessage()
				if err != nil {
					return // closed at the end, or failed: the round then times out
				}
				f := strings.Fields(string(msg))
				if t != websocket.TextMessage || len(f) < 2 || f[0] != "broadcast" || len(msg) != size {
					errs.Add(1)
					continue
				}
				if seq, _ := strconv.ParseInt(f[1], 10, 64); seq == round.Load() {
					if got.Add(1) == n {
						done <- time.Now()
					}
				}
			}
		}(c)
	}
	var ms []float64
	for r := 0; r <= rounds; r++ {
		got.Store(0)
		round.Store(int64(r))
		msg := payload(size, "broadcast "+strconv.Itoa(r)+" ")
		t0 := time.Now()
		if err := cs[0].WriteMessage(websocket.TextMessage, msg); err != nil {
			fmt.Fprintln(os.Stderr, "wsload: broadcast:", err)
			return 1
		}
		select {
		case t1 := <-done:
			d := float64(t1.Sub(t0).Microseconds()) / 1000
			if r == 0 {
				fmt.Printf("WARMUP ms=%.2f\n", d)
			} else {
				fmt.Printf("ROUND %d ms=%.2f\n", r, d)
				ms = append(ms, d)
			}
		case <-time.After(timeout):
			fmt.Fprintf(os.Stderr, "wsload: round %d: %d of %d connections read the message within %v\n",
				r, got.Load(), n, timeout)
			errs.Add(1)
			fmt.Printf("RESULT median_ms=-1 min_ms=-1 max_ms=-1 errors=%d\n", errs.Load())
			return 1
		}
		time.Sleep(300 * time.Millisecond)
	}
	sort.Float64s(ms)
	fmt.Printf("RESULT median_ms=%.2f min_ms=%.2f max_ms=%.2f errors=%d\n",
		ms[len(ms)/2], ms[0], ms[len(ms)-1], errs.Load())
	if errs.Load() > 0 {
		return 1
	}
	return 0
}

func idle(cs []*websocket.Conn, hold time.Duration) int {
	var lost atomic.Int64
	var stopping atomic.Bool
	for _, c := range cs {
		// reading answers the server's pings and notices a connection the server closed
		go func(c *websocket.Conn) {
			for {
				if _, _, err := c.ReadMessage(); err != nil {
					if !stopping.Load() {
						lost.Add(1)
					}
					return
				}
			}
		}(c)
	}
	fmt.Printf("OPEN %d\n", len(cs))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-sig:
	case <-time.After(hold):
	}
	stopping.Store(true)
	fmt.Printf("CLOSED lost=%d\n", lost.Load())
	if lost.Load() > 0 {
		return 1
	}
	return 0
}
