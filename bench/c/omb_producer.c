/* A paced librdkafka producer for bench/omb.py (`--client c` at a fixed rate).
 *
 * rdkafka_performance -r paces every message with rd_kafka_poll(timeout), which spins when messages
 * are less than 1 ms apart (20 MB/s of 1 KiB records from two producers: 100 us apart), so it burns a
 * core of the machine the brokers run on. This one produces the messages due every millisecond in a
 * burst and sleeps in rd_kafka_poll() between bursts.
 *
 * Values start with "LATENCY:<wall clock us>" (rdkafka_performance's -l format, so its consumer's -A
 * measures end-to-end latency), padded to -s bytes. Publish latency (produce to delivery report) of
 * each record, in us, one per line in delivery order, goes to the -A file when it stops (SIGINT or
 * SIGTERM: stop producing, wait up to 60 s for outstanding deliveries).
 *
 * -S FILE appends librdkafka's statistics (one JSON document a line, every 5 s unless
 * -X statistics.interval.ms=... says otherwise): per broker rtt, int_latency, outbuf_latency.
 *
 * usage: omb_producer -b BOOTSTRAP -t TOPIC -s SIZE -r MSGS_PER_S -A FILE [-S FILE] [-X key=value ...]
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "rdkafka.h"

static volatile sig_atomic_t run = 1;
static uint32_t *lat;
static size_t nlat, caplat;
static uint64_t failed;
static FILE *stats_fp;

static int on_stats(rd_kafka_t *rk, char *json, size_t len, void *opaque) {
        (void)rk;
        (void)opaque;
        fwrite(json, 1, len, stats_fp);
        fputc('\n', stats_fp);
        fflush(stats_fp);
        return 0; /* librdkafka frees json */
}

static void stop(int sig) {
        (void)sig;
        run = 0;
}

static uint64_t wall_us(void) {
        struct timeval tv;
        gettimeofday(&tv, NULL);
        return (uint64_t)tv.tv_sec * 1000000u + (uint64_t)tv.tv_usec;
}

static uint64_t mono_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
        uint64_t sent;
        (void)rk;
        (void)opaque;
        if (m->err) {
                failed++;
                return;
        }
        if (sscanf(m->payload, "LATENCY:%" SCNu64, &sent) != 1)
                return;
        if (nlat == caplat) {
                caplat = caplat ? caplat * 2 : 1 << 20;
                lat = realloc(lat, caplat * sizeof(*lat));
                if (!lat) {
                        perror("realloc");
                        exit(1);
                }
        }
        lat[nlat++] = (uint32_t)(wall_us() - sent);
}

static void set(rd_kafka_conf_t *conf, const char *key, const char *value) {
        char err[512];
        if (rd_kafka_conf_set(conf, key, value, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
                fprintf(stderr, "%s=%s: %s\n", key, value, err);
                exit(2);
        }
}

int main(int argc, char **argv) {
        const char *topic = NULL, *out = NULL;
        size_t size = 1024;
        double rate = 0;
        char err[512];
        int opt;
        rd_kafka_conf_t *conf = rd_kafka_conf_new();

        set(conf, "acks", "all");
        set(conf, "enable.idempotence", "true");
        set(conf, "linger.ms", "1");
        set(conf, "batch.size", "1000000");
        set(conf, "sticky.partitioning.linger.ms", "0");
        set(conf, "queue.buffering.max.messages", "1000000");
        set(conf, "queue.buffering.max.kbytes", "1048576");
        while ((opt = getopt(argc, argv, "b:t:s:r:A:S:X:")) != -1) {
                switch (opt) {
                case 'b': set(conf, "bootstrap.servers", optarg); break;
                case 't': topic = optarg; break;
                case 's': size = (size_t)atol(optarg); break;
                case 'r': rate = atof(optarg); break;
                case 'A': out = optarg; break;
                case 'S':
                        if (!(stats_fp = fopen(optarg, "a"))) {
                                perror(optarg);
                                return 2;
                        }
                        rd_kafka_conf_set_stats_cb(conf, on_stats);
                        if (rd_kafka_conf_set(conf, "statistics.interval.ms", "5000", err, sizeof(err)) !=
                            RD_KAFKA_CONF_OK) {
                                fprintf(stderr, "%s\n", err);
                                return 2;
                        }
                        break;
                case 'X': {
                        char *eq = strchr(optarg, '=');
                        if (!eq) {
                                fprintf(stderr, "-X %s: not key=value\n", optarg);
                                return 2;
                        }
                        *eq = '\0';
                        set(conf, optarg, eq + 1);
                        break;
                }
                default:
                        fprintf(stderr, "usage: %s -b BOOTSTRAP -t TOPIC -s SIZE -r MSGS_PER_S -A FILE\n", argv[0]);
                        return 2;
                }
        }
        if (!topic || !out || rate <= 0 || size < 32) {
                fprintf(stderr, "-t, -A, a positive -r and -s >= 32 are required\n");
                return 2;
        }
        rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
        if (!rk) {
                fprintf(stderr, "%s\n", err);
                return 1;
        }
        signal(SIGINT, stop);
        signal(SIGTERM, stop);

        char *value = malloc(size);
        memset(value, 'x', size);
        uint64_t start = mono_us(), produced = 0;
        while (run) {
                /* Everything due by now, in one burst; then sleep until the next millisecond. */
                uint64_t due = (uint64_t)((double)(mono_us() - start) * rate / 1e6);
                while (produced < due && run) {
                        int n = snprintf(value, size, "LATENCY:%" PRIu64, wall_us());
                        value[n] = ' ';
                        rd_kafka_resp_err_t e = rd_kafka_producev(
                            rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_VALUE(value, size),
                            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
                        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                                rd_kafka_poll(rk, 1);
                                continue;
                        }
                        if (e) {
                                fprintf(stderr, "produce: %s\n", rd_kafka_err2str(e));
                                return 1;
                        }
                        produced++;
                }
                rd_kafka_poll(rk, 1);
        }
        rd_kafka_flush(rk, 60000);
        FILE *f = fopen(out, "w");
        if (!f) {
                perror(out);
                return 1;
        }
        for (size_t i = 0; i < nlat; i++)
                fprintf(f, "%" PRIu32 "\n", lat[i]);
        fclose(f);
        fprintf(stderr, "produced %" PRIu64 ", delivered %zu, failed %" PRIu64 ", left %d\n", produced, nlat,
                failed, rd_kafka_outq_len(rk));
        rd_kafka_destroy(rk);
        free(value);
        free(lat);
        return 0;
}
