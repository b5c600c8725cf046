// Command soak-loadgen drives the soak server (bench/soak.sh) open-loop: requests are
// scheduled at a fixed rate whatever the server does, spread over a fixed set of keep-alive
// connections, one per worker goroutine. Latency is measured from each request's scheduled
// time, so a stalled server shows up as latency (no coordinated omission), and a request the
// workers could not pick up within the backlog is counted as not sent.
//
// Every request is written and read by hand over its own connection (net/http's client would
// retry some failed requests on a new connection and hide them). A request counts as answered
// only once its whole response has been read; sent minus answered is what was lost.
//
// Every 10 s it prints a progress line with the server's RSS (VmRSS of -pid). At the end it
// prints the totals, errors by kind, latency percentiles and the RSS figures, and exits 1 when
// a request was lost, not sent, answered wrongly, or the RSS grew more than -rss-max-growth-mb
// between the start and the end of the run.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type kind int

const (
	kSmall kind = iota
	kLarge
	kFail
	kUpload
	nKinds
)

var kindNames = [nKinds]string{"small", "large", "fail", "upload"}

const (
	smallBody  = "Hello, World!"
	largeSize  = 1024 * 1024
	uploadSize = 64 * 1024
)

// Error kinds, in the order they are printed.
const (
	eDial = iota
	eWrite
	eTimeout
	eReset
	eEOF
	eRead
	eStatus
	eBody
	nErrs
)

var errNames = [nErrs]string{"connect", "write", "timeout", "reset", "eof", "read", "wrong-status", "wrong-body"}

type job struct {
	kind    kind
	chunked bool
	sched   time.Time
}

type counters struct {
	scheduled, notSent, sent, answered, dials, serverClosed atomic.Int64
	bytesIn                                                 atomic.Int64
	errs                                                    [nErrs]atomic.Int64
	byKind                                                  [nKinds]atomic.Int64
}

type worker struct {
	addr    string
	timeout time.Duration
	c       *counters
	conn    net.Conn
	br      *bufio.Reader
	bw      *bufio.Writer
	lat     [nKinds][]int64 // microseconds
}

var uploadData = func() []byte {
	b := make([]byte, uploadSize)
	for i := range b {
		b[i] = byte('A' + i%26)
	}
	return b
}()

func (w *worker) dial() error {
	w.c.dials.Add(1)
	conn, err := net.DialTimeout("tcp", w.addr, w.timeout)
	if err != nil {
		return err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	w.conn = conn
	w.br = bufio.NewReaderSize(conn, 64*1024)
	w.bw = bufio.NewWriterSize(conn, 16*1024)
	return nil
}

func (w *worker) drop() {
	if w.conn != nil {
		w.conn.Close()
		w.conn = nil
	}
}

func classify(err error) int {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return eTimeout
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return eReset
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return eEOF
	default:
		return eRead
	}
}

func (w *worker) writeRequest(j job) error {
	host := w.addr
	switch j.kind {
	case kUpload:
		if j.chunked {
			fmt.Fprintf(w.bw, "POST /upload HTTP/1.1\r\nHost: %s\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n", host)
			for off := 0; off < len(uploadData); off += 16 * 1024 {
				fmt.Fprintf(w.bw, "%x\r\n", 16*1024)
				w.bw.Write(uploadData[off : off+16*1024])
				w.bw.WriteString("\r\n")
			}
			w.bw.WriteString("0\r\n\r\n")
		} else {
			fmt.Fprintf(w.bw, "POST /upload HTTP/1.1\r\nHost: %s\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", host, len(uploadData))
			w.bw.Write(uploadData)
		}
	default:
		fmt.Fprintf(w.bw, "GET /%s HTTP/1.1\r\nHost: %s\r\n\r\n", kindNames[j.kind], host)
	}
	return w.bw.Flush()
}

// do sends one request and reads its whole response; it records the outcome.
func (w *worker) do(j job) {
	c := w.c
	c.sent.Add(1)
	c.byKind[j.kind].Add(1)
	if w.conn == nil {
		if err := w.dial(); err != nil {
			c.errs[eDial].Add(1)
			return
		}
	}
	w.conn.SetDeadline(time.Now().Add(w.timeout))
	if err := w.writeRequest(j); err != nil {
		c.errs[eWrite].Add(1)
		w.drop()
		return
	}
	resp, err := http.ReadResponse(w.br, nil)
	if err != nil {
		c.errs[classify(err)].Add(1)
		w.drop()
		return
	}
	var n int64
	var body bytes.Buffer
	if j.kind == kLarge {
		n, err = io.Copy(io.Discard, resp.Body)
	} else {
		n, err = io.Copy(&body, io.LimitReader(resp.Body, 1<<20))
	}
	resp.Body.Close()
	if err != nil {
		c.errs[classify(err)].Add(1)
		w.drop()
		return
	}
	c.answered.Add(1)
	c.bytesIn.Add(n)
	w.lat[j.kind] = append(w.lat[j.kind], time.Since(j.sched).Microseconds())
	want := 200
	if j.kind == kFail {
		want = 500
	}
	if resp.StatusCode != want {
		c.errs[eStatus].Add(1)
	} else {
		ok := true
		switch j.kind {
		case kSmall:
			ok = body.String() == smallBody
		case kLarge:
			ok = n == largeSize
		case kUpload:
			ok = body.String() == strconv.Itoa(uploadSize)
		}
		if !ok {
			c.errs[eBody].Add(1)
		}
	}
	if resp.Close {
		c.serverClosed.Add(1)
		w.drop()
	}
}

func rssKB(pid int) int64 {
	if pid <= 0 {
		return -1
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				v, _ := strconv.ParseInt(f[1], 10, 64)
				return v
			}
		}
	}
	return -1
}

func mib(kb int64) string {
	if kb < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f MiB", float64(kb)/1024)
}

type mix [nKinds]int

func parseMix(s string) (mix, error) {
	var m mix
	total := 0
	for _, part := range strings.Split(s, ",") {
		kv := strings.SplitN(strings.TrimSpace(part), "=", 2)
		if len(kv) != 2 {
			return m, fmt.Errorf("bad mix entry %q", part)
		}
		found := false
		for k := kind(0); k < nKinds; k++ {
			if kindNames[k] == kv[0] {
				v, err := strconv.Atoi(kv[1])
				if err != nil || v < 0 {
					return m, fmt.Errorf("bad weight in %q", part)
				}
				m[k] = v
				total += v
				found = true
			}
		}
		if !found {
			return m, fmt.Errorf("unknown kind %q (small, large, fail, upload)", kv[0])
		}
	}
	if total == 0 {
		return m, errors.New("the mix has no weight")
	}
	return m, nil
}

func (m mix) pick(r *rand.Rand) kind {
	total := 0
	for _, v := range m {
		total += v
	}
	x := r.Intn(total)
	for k := kind(0); k < nKinds; k++ {
		if x < m[k] {
			return k
		}
		x -= m[k]
	}
	return kSmall
}

func percentile(sorted []int64, p float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p/100*float64(len(sorted)-1) + 0.5)
	return sorted[i]
}

func ms(us int64) string { return fmt.Sprintf("%.2f ms", float64(us)/1000) }

type summary struct {
	Seconds        float64          `json:"seconds"`
	Rate           float64          `json:"rate"`
	Connections    int              `json:"connections"`
	Scheduled      int64            `json:"scheduled"`
	NotSent        int64            `json:"not_sent"`
	Sent           int64            `json:"sent"`
	Answered       int64            `json:"answered"`
	Lost           int64            `json:"lost"`
	Dials          int64            `json:"connects"`
	ServerClosed   int64            `json:"server_closed"`
	Errors         map[string]int64 `json:"errors"`
	SentByKind     map[string]int64 `json:"sent_by_kind"`
	P50us          int64            `json:"p50_us"`
	P99us          int64            `json:"p99_us"`
	P999us         int64            `json:"p999_us"`
	MaxUs          int64            `json:"max_us"`
	RSSStartKB     int64            `json:"rss_start_kb"`
	RSSEndKB       int64            `json:"rss_end_kb"`
	RSSMaxKB       int64            `json:"rss_max_kb"`
	RSSSamplesKB   []int64          `json:"rss_samples_kb"`
	Failed         bool             `json:"failed"`
	FailureReasons []string         `json:"failure_reasons"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "server host:port")
	rate := flag.Float64("rate", 1000, "requests per second, held open-loop")
	seconds := flag.Float64("seconds", 300, "how long to send")
	conns := flag.Int("connections", 500, "keep-alive connections (one worker each)")
	mixFlag := flag.String("mix", "small=75,large=5,fail=5,upload=15", "request mix, weights by kind")
	timeout := flag.Duration("timeout", 10*time.Second, "per-request timeout (connect, write and read)")
	backlogS := flag.Float64("backlog", 2, "seconds of scheduled requests that may wait for a free connection before further ones count as not sent")
	pid := flag.Int("pid", 0, "server pid, for VmRSS")
	rssGrowth := flag.Int64("rss-max-growth-mb", 128, "fail when the server's RSS grows more than this from the start to the end of the run (0: no check)")
	every := flag.Duration("every", 10*time.Second, "progress and RSS sampling interval")
	label := flag.String("label", "soak", "prefix of the progress lines")
	jsonOut := flag.String("json", "", "also write the summary as JSON to this file")
	seed := flag.Int64("seed", 1, "seed of the request mix")
	flag.Parse()

	m, err := parseMix(*mixFlag)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak-loadgen:", err)
		os.Exit(2)
	}
	if *rate <= 0 || *seconds <= 0 || *conns <= 0 {
		fmt.Fprintln(os.Stderr, "soak-loadgen: -rate, -seconds and -connections must be positive")
		os.Exit(2)
	}

	c := &counters{}
	backlog := int(*rate * *backlogS)
	if backlog < *conns {
		backlog = *conns
	}
	jobs := make(chan job, backlog)
	workers := make([]*worker, *conns)

	// Open every connection before the clock starts.
	var dialWG sync.WaitGroup
	var dialFail atomic.Int64
	for i := range workers {
		w := &worker{addr: *addr, timeout: *timeout, c: c}
		workers[i] = w
		dialWG.Add(1)
		go func() {
			defer dialWG.Done()
			if err := w.dial(); err != nil {
				dialFail.Add(1)
			}
		}()
	}
	dialWG.Wait()
	if n := dialFail.Load(); n > 0 {
		fmt.Fprintf(os.Stderr, "soak-loadgen: %d of %d connections could not be opened\n", n, *conns)
		os.Exit(2)
	}

	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func(w *worker) {
			defer wg.Done()
			for j := range jobs {
				w.do(j)
			}
			w.drop()
		}(w)
	}

	rssStart := rssKB(*pid)
	rssSamples := []int64{rssStart}
	var rssMu sync.Mutex
	start := time.Now()
	dur := time.Duration(*seconds * float64(time.Second))
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	fmt.Printf("[%s] %d connections open, %.0f req/s for %.0f s, mix %s, server RSS %s\n",
		*label, *conns, *rate, *seconds, *mixFlag, mib(rssStart))
	go func() {
		defer close(progressDone)
		t := time.NewTicker(*every)
		defer t.Stop()
		var lastAnswered int64
		last := start
		for {
			select {
			case <-stopProgress:
				return
			case now := <-t.C:
				r := rssKB(*pid)
				rssMu.Lock()
				rssSamples = append(rssSamples, r)
				rssMu.Unlock()
				a := c.answered.Load()
				var errs int64
				for i := range c.errs {
					errs += c.errs[i].Load()
				}
				fmt.Printf("[%s] t=%3.0fs sent=%d answered=%d (%.0f/s) in-flight=%d errors=%d not-sent=%d rss=%s\n",
					*label, now.Sub(start).Seconds(), c.sent.Load(), a,
					float64(a-lastAnswered)/now.Sub(last).Seconds(),
					c.sent.Load()-a-(errs-c.errs[eStatus].Load()-c.errs[eBody].Load()),
					errs, c.notSent.Load(), mib(r))
				lastAnswered, last = a, now
			}
		}
	}()

	// Open-loop schedule: request i is due at start + i/rate.
	r := rand.New(rand.NewSource(*seed))
	var issued int64
	interval := time.Duration(float64(time.Second) / *rate)
	for {
		el := time.Since(start)
		if el >= dur {
			break
		}
		due := int64(el.Seconds() * *rate)
		for ; issued < due; issued++ {
			k := m.pick(r)
			j := job{kind: k, chunked: k == kUpload && r.Intn(2) == 0,
				sched: start.Add(time.Duration(issued) * interval)}
			select {
			case jobs <- j:
			default:
				c.notSent.Add(1)
			}
		}
		time.Sleep(time.Millisecond)
	}
	c.scheduled.Store(issued)
	close(jobs)
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(*timeout + 5*time.Second):
		fmt.Fprintln(os.Stderr, "soak-loadgen: workers did not finish in time")
	}
	elapsed := time.Since(start)
	close(stopProgress)
	<-progressDone
	rssEnd := rssKB(*pid)
	rssSamples = append(rssSamples, rssEnd)

	// Totals.
	var all []int64
	perKind := [nKinds][]int64{}
	for _, w := range workers {
		for k := kind(0); k < nKinds; k++ {
			perKind[k] = append(perKind[k], w.lat[k]...)
			all = append(all, w.lat[k]...)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	s := summary{
		Seconds: elapsed.Seconds(), Rate: *rate, Connections: *conns,
		Scheduled: c.scheduled.Load(), NotSent: c.notSent.Load(), Sent: c.sent.Load(),
		Answered: c.answered.Load(), Dials: c.dials.Load(), ServerClosed: c.serverClosed.Load(),
		Errors: map[string]int64{}, SentByKind: map[string]int64{},
		P50us: percentile(all, 50), P99us: percentile(all, 99), P999us: percentile(all, 99.9),
		RSSStartKB: rssStart, RSSEndKB: rssEnd, RSSSamplesKB: rssSamples,
	}
	if len(all) > 0 {
		s.MaxUs = all[len(all)-1]
	}
	s.Lost = s.Sent - s.Answered
	for i := range c.errs {
		s.Errors[errNames[i]] = c.errs[i].Load()
	}
	for k := kind(0); k < nKinds; k++ {
		s.SentByKind[kindNames[k]] = c.byKind[k].Load()
	}
	for _, v := range rssSamples {
		if v > s.RSSMaxKB {
			s.RSSMaxKB = v
		}
	}

	fmt.Printf("\n[%s] ===== summary (%.1f s) =====\n", *label, s.Seconds)
	fmt.Printf("  scheduled   %d (%.0f req/s target)\n", s.Scheduled, *rate)
	fmt.Printf("  sent        %d   answered %d   lost %d   not sent (backlog full) %d\n",
		s.Sent, s.Answered, s.Lost, s.NotSent)
	fmt.Printf("  achieved    %.0f answered/s\n", float64(s.Answered)/s.Seconds)
	fmt.Printf("  by kind     ")
	for k := kind(0); k < nKinds; k++ {
		fmt.Printf("%s=%d ", kindNames[k], s.SentByKind[kindNames[k]])
	}
	fmt.Println()
	fmt.Printf("  errors      ")
	for i := 0; i < nErrs; i++ {
		fmt.Printf("%s=%d ", errNames[i], s.Errors[errNames[i]])
	}
	fmt.Println("(500s from /fail are expected and not errors)")
	fmt.Printf("  connections %d opened for %d workers; %d closed by the server after a response\n",
		s.Dials, *conns, s.ServerClosed)
	fmt.Printf("  latency     p50 %s   p99 %s   p99.9 %s   max %s   (from the scheduled time)\n",
		ms(s.P50us), ms(s.P99us), ms(s.P999us), ms(s.MaxUs))
	for k := kind(0); k < nKinds; k++ {
		l := perKind[k]
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		fmt.Printf("    %-7s   n=%-7d p50 %s   p99 %s\n", kindNames[k], len(l), ms(percentile(l, 50)), ms(percentile(l, 99)))
	}
	fmt.Printf("  server RSS  start %s   end %s   max %s   samples:", mib(rssStart), mib(rssEnd), mib(s.RSSMaxKB))
	for _, v := range rssSamples {
		if v < 0 {
			fmt.Print(" n/a")
		} else {
			fmt.Printf(" %.0f", float64(v)/1024)
		}
	}
	fmt.Println(" MiB")

	if s.Lost > 0 {
		s.FailureReasons = append(s.FailureReasons, fmt.Sprintf("%d requests lost (sent, never fully answered)", s.Lost))
	}
	if s.NotSent > 0 {
		s.FailureReasons = append(s.FailureReasons, fmt.Sprintf("%d requests not sent: the rate was not held (backlog full)", s.NotSent))
	}
	if n := s.Errors["wrong-status"] + s.Errors["wrong-body"]; n > 0 {
		s.FailureReasons = append(s.FailureReasons, fmt.Sprintf("%d requests answered wrongly", n))
	}
	if *rssGrowth > 0 && rssStart > 0 && rssEnd > 0 && rssEnd-rssStart > *rssGrowth*1024 {
		s.FailureReasons = append(s.FailureReasons, fmt.Sprintf("server RSS grew %s (limit %d MiB)", mib(rssEnd-rssStart), *rssGrowth))
	}
	s.Failed = len(s.FailureReasons) > 0
	if *jsonOut != "" {
		if b, err := json.MarshalIndent(s, "", "  "); err == nil {
			os.WriteFile(*jsonOut, b, 0o644)
		}
	}
	if s.Failed {
		for _, why := range s.FailureReasons {
			fmt.Printf("[%s] FAIL: %s\n", *label, why)
		}
		os.Exit(1)
	}
	fmt.Printf("[%s] PASS\n", *label)
}
