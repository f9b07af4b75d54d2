// A paced Sarama producer for bench/omb.py (`--client go` at a fixed rate).
//
// librdkafka (bench/c/omb_producer.c) puts one partition in each ProduceRequest, and an idempotent
// producer keeps at most 5 requests in flight per broker: with 100 partitions the records wait in the
// producer for a turn. Kafka's Java client, which OMB uses, puts the batches of all the partitions a
// broker leads into one request; so does Sarama's brokerProducer (one request in flight per broker).
//
// Same command line and output as omb_producer.c: the messages due every millisecond in a burst, then
// a sleep. Values start with "LATENCY:<wall clock us> " (rdkafka_performance's -l format, so its
// consumer's -A measures end-to-end latency), padded with 'x' to -s bytes; no key, a random partition
// each. Publish latency (produce to success), in us, one per line in arrival order, goes to the -A file
// when it stops (SIGINT or SIGTERM: stop producing, wait up to 60 s for outstanding deliveries).
//
// OMB's settings: acks=all, idempotent, linger.ms=1 (Flush.Frequency), 1 MB batches, no compression.
// -X takes librdkafka-style names for the few settings that map onto Sarama's (see setX).
//
// build: GO111MODULE=off GOPATH=/usr/share/gocode go build -o omb_producer_go omb_producer.go
// (Debian's golang-github-shopify-sarama-dev)
//
// usage: omb_producer_go -b BOOTSTRAP -t TOPIC -s SIZE -r MSGS_PER_S -A FILE [-X key=value ...]
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/Shopify/sarama"
	metrics "github.com/rcrowley/go-metrics"
)

type kvList []string

func (l *kvList) String() string     { return strings.Join(*l, ",") }
func (l *kvList) Set(s string) error { *l = append(*l, s); return nil }

func die(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(2)
}

// setX applies one -X key=value (librdkafka's names) to Sarama's configuration.
func setX(cfg *sarama.Config, key, value string) {
	atoi := func() int {
		n, err := strconv.Atoi(value)
		if err != nil || n < 0 {
			die("-X %s=%s: not a non-negative integer", key, value)
		}
		return n
	}
	switch key {
	case "linger.ms":
		cfg.Producer.Flush.Frequency = time.Duration(atoi()) * time.Millisecond
	case "batch.size": // bytes that send a broker's request before linger.ms is up
		cfg.Producer.Flush.Bytes = atoi()
	case "enable.idempotence":
		b, err := strconv.ParseBool(value)
		if err != nil {
			die("-X %s=%s: not true or false", key, value)
		}
		cfg.Producer.Idempotent = b
	case "max.in.flight.requests.per.connection":
		cfg.Net.MaxOpenRequests = atoi()
	case "acks":
		switch value {
		case "all", "-1":
			cfg.Producer.RequiredAcks = sarama.WaitForAll
		case "1":
			cfg.Producer.RequiredAcks = sarama.WaitForLocal
		case "0":
			cfg.Producer.RequiredAcks = sarama.NoResponse
		default:
			die("-X acks=%s: all, -1, 1 or 0", value)
		}
	case "debug": // any value: Sarama's log to stderr
		sarama.Logger = stderrLogger{os.Stderr}
	default:
		die("-X %s: unknown (linger.ms, batch.size, enable.idempotence, "+
			"max.in.flight.requests.per.connection, acks, debug)", key)
	}
}

type stderrLogger struct{ w *os.File }

func (l stderrLogger) Print(v ...interface{})                 { fmt.Fprint(l.w, v...) }
func (l stderrLogger) Printf(format string, v ...interface{}) { fmt.Fprintf(l.w, format, v...) }
func (l stderrLogger) Println(v ...interface{})               { fmt.Fprintln(l.w, v...) }

// newProducer tries the newest protocol versions first: Sarama 1.22.1 knows Kafka up to 2.2.
func newProducer(brokers []string, cfg *sarama.Config) (sarama.AsyncProducer, sarama.KafkaVersion) {
	var lastErr error
	for _, v := range []sarama.KafkaVersion{sarama.V2_2_0_0, sarama.V2_1_0_0, sarama.V1_0_0_0, sarama.V0_11_0_0} {
		cfg.Version = v
		p, err := sarama.NewAsyncProducer(brokers, cfg)
		if err == nil {
			return p, v
		}
		if _, bad := err.(sarama.ConfigurationError); bad {
			die("%v", err)
		}
		lastErr = err
		fmt.Fprintf(os.Stderr, "version %s: %v\n", v, err)
	}
	fmt.Fprintf(os.Stderr, "%v\n", lastErr)
	os.Exit(1)
	return nil, sarama.KafkaVersion{}
}

func main() {
	var (
		bootstrap = flag.String("b", "localhost:9092", "bootstrap servers")
		topic     = flag.String("t", "", "topic")
		size      = flag.Int("s", 1024, "value size")
		rate      = flag.Float64("r", 0, "messages per second")
		out       = flag.String("A", "", "publish latencies (us) file")
		xs        kvList
	)
	flag.Var(&xs, "X", "key=value (repeatable)")
	flag.Parse()
	if *topic == "" || *out == "" || *rate <= 0 || *size < 32 || flag.NArg() > 0 {
		die("usage: %s -b BOOTSTRAP -t TOPIC -s SIZE -r MSGS_PER_S -A FILE [-X key=value ...]\n"+
			"-t, -A, a positive -r and -s >= 32 are required", os.Args[0])
	}

	metrics.UseNilMetrics = true // Sarama's go-metrics cost CPU per request and record
	debug.SetGCPercent(400)      // the heap is small: collect less often

	cfg := sarama.NewConfig()
	cfg.ClientID = "omb-producer-go"
	cfg.ChannelBufferSize = 4096
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1 // Sarama's idempotent producer requires it
	cfg.Producer.Retry.Max = 10
	cfg.Producer.Partitioner = sarama.NewRandomPartitioner
	cfg.Producer.Flush.Frequency = time.Millisecond
	cfg.Producer.Flush.Bytes = 1000000
	cfg.Producer.MaxMessageBytes = 1000000 // a partition's batch
	cfg.Producer.Compression = sarama.CompressionNone
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	explicitInflight := false
	for _, kv := range xs {
		eq := strings.IndexByte(kv, '=')
		if eq < 0 {
			die("-X %s: not key=value", kv)
		}
		if kv[:eq] == "max.in.flight.requests.per.connection" {
			explicitInflight = true
		}
		setX(cfg, kv[:eq], kv[eq+1:])
	}
	if !cfg.Producer.Idempotent && !explicitInflight {
		cfg.Net.MaxOpenRequests = 5
	}
	stop := make(chan os.Signal, 1) // a signal while connecting: no message, the file still written
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	p, version := newProducer(strings.Split(*bootstrap, ","), cfg)

	// Values go back to `free` once delivered (Sarama no longer holds them), so the steady state
	// allocates little.
	free := make(chan []byte, 1<<16)
	var (
		mu     sync.Mutex
		lat    = make([]uint32, 0, 1<<20)
		failed uint64
		wg     sync.WaitGroup
	)
	start := time.Now() // its monotonic reading: a message's Metadata is its send time since start
	wg.Add(2)
	go func() {
		defer wg.Done()
		for m := range p.Successes() {
			us := uint32((time.Since(start) - m.Metadata.(time.Duration)) / time.Microsecond)
			mu.Lock()
			lat = append(lat, us)
			mu.Unlock()
			select {
			case free <- []byte(m.Value.(sarama.ByteEncoder)):
			default:
			}
		}
	}()
	go func() {
		defer wg.Done()
		for e := range p.Errors() {
			mu.Lock()
			failed++
			if failed <= 10 {
				fmt.Fprintf(os.Stderr, "delivery to partition %d: %v\n", e.Msg.Partition, e.Err)
			}
			mu.Unlock()
		}
	}()

	var produced uint64
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
loop:
	for {
		select { // a select with several ready cases picks one at random: stop first
		case <-stop:
			break loop
		default:
		}
		// Everything due by now, in one burst; then sleep until the next millisecond.
		due := uint64(time.Since(start).Seconds() * *rate)
		for produced < due {
			var v []byte
			select {
			case v = <-free:
			default:
				v = make([]byte, *size)
				for i := range v {
					v[i] = 'x'
				}
			}
			n := copy(v, "LATENCY:")
			b := strconv.AppendInt(v[n:n], time.Now().UnixMicro(), 10)
			v[n+len(b)] = ' '
			msg := &sarama.ProducerMessage{Topic: *topic, Value: sarama.ByteEncoder(v), Metadata: time.Since(start)}
			select {
			case p.Input() <- msg:
				produced++
			case <-stop:
				break loop
			}
		}
		select {
		case <-tick.C:
		case <-stop:
			break loop
		}
	}

	p.AsyncClose() // sends what is buffered; Successes and Errors close when everything is answered
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		fmt.Fprintln(os.Stderr, "deliveries still outstanding after 60 s")
	}

	mu.Lock()
	defer mu.Unlock()
	f, err := os.Create(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	w := bufio.NewWriterSize(f, 1<<16)
	var line []byte
	for _, us := range lat {
		line = strconv.AppendUint(line[:0], uint64(us), 10)
		line = append(line, '\n')
		w.Write(line)
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	f.Close()
	fmt.Fprintf(os.Stderr, "produced %d, delivered %d, failed %d, left %d (Kafka version %s)\n", produced,
		len(lat), failed, produced-uint64(len(lat))-failed, version)
}
