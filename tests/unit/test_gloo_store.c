/* Unit tests for Horovod's HTTP store (horovodrun/gloo_store.c). */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "launcher/lib/errcode.h"
#include "launcher/lib/plan.h"
#include "launcher/horovodrun/gloo_store.h"

static struct hr_gloo_cfg cfg;
static struct hr_gloo_store *st;
static int port;
static char err[256];
static const char *listen_addr = "127.0.0.1";

static void setup(void)
{
    hr_gloo_cfg_init(&cfg);
    st = NULL;
    port = 0;
    err[0] = '\0';
    listen_addr = "127.0.0.1";
}

static void teardown(void)
{
    hr_gloo_store_close(st);
    hr_gloo_cfg_close(&cfg);
}

TestSuite(gloo_store, .init = setup, .fini = teardown, .timeout = 30);

/* Limits small enough to reach in a test. */
static void small_limits(void)
{
    cfg.limits.name_max = 32;
    cfg.limits.value_max = 64;
    cfg.limits.keys_max = 4;
    cfg.limits.bytes_max = 1024;
    cfg.limits.conns_max = 16;
    cfg.limits.conns_per_ip = 8;
    cfg.limits.idle_timeout = 1;
}

static void start(void)
{
    int rc =
        hr_gloo_store_start(&st, &cfg, listen_addr, 0, &port, err, sizeof(err));
    cr_assert_eq(rc, 0, "start: %d %s", rc, err);
    cr_assert_gt(port, 0);
}

/* Allows 127.0.0.1 only, and starts. */
static void start_lo(void)
{
    cr_assert_eq(hr_gloo_cfg_allow_host(&cfg, "127.0.0.1", err, sizeof(err)), 0,
                 "%s", err);
    start();
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A connection to the store from src (NULL: the kernel's choice). */
static int dial_from(const char *src)
{
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    cr_assert_geq(fd, 0);
    if (src != NULL) {
        memset(&a, 0, sizeof(a));
        a.sin_family = AF_INET;
        cr_assert_eq(inet_pton(AF_INET, src, &a.sin_addr), 1);
        cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0,
                     "bind %s: %s", src, strerror(errno));
    }
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0, "%s",
                 strerror(errno));
    return fd;
}

static int dial(void)
{
    return dial_from(NULL);
}

static int send_all(int fd, const void *p, size_t n)
{
    const char *c = p;

    while (n > 0) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int send_str(int fd, const char *s)
{
    return send_all(fd, s, strlen(s));
}

/*
 * Sends a request the way Horovod's HTTPStore does (through the
 * HTTPRequest library): the method line, Host without the port, and a
 * Content-Length even for GET and DELETE, then the body.
 */
static int send_req(int fd, const char *method, const char *path,
                    const void *body, size_t len)
{
    char head[512];
    int n = snprintf(head, sizeof(head),
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     method, path, len);

    cr_assert_lt((size_t)n, sizeof(head));
    if (send_all(fd, head, (size_t)n) != 0)
        return -1;
    return len > 0 ? send_all(fd, body, len) : 0;
}

struct resp {
    int status; /* -1: the connection ended without an answer */
    char head[2048];
    unsigned char body[4096];
    size_t len;
};

/* Receives into buf, waiting up to 5 s. Bytes, 0 at the end, -1. */
static ssize_t recv_wait(int fd, void *buf, size_t n)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};

    if (poll(&p, 1, 5000) != 1)
        return -1;
    return recv(fd, buf, n, 0);
}

/*
 * Reads one response as HTTPRequest does: headers up to the blank line,
 * the status from the first line, then Content-Length bytes (that header
 * name matched exactly, as that library does).
 */
static int read_resp(int fd, struct resp *r)
{
    size_t hl = 0;
    char *end = NULL, *cl;
    long want;

    memset(r, 0, sizeof(*r));
    r->status = -1;
    while (end == NULL) {
        ssize_t n;
        if (hl + 1 >= sizeof(r->head))
            return -1;
        n = recv_wait(fd, r->head + hl, 1);
        if (n <= 0)
            return -1;
        hl += (size_t)n;
        r->head[hl] = '\0';
        end = strstr(r->head, "\r\n\r\n");
    }
    if (sscanf(r->head, "HTTP/1.%*d %d", &r->status) != 1)
        return r->status = -1;
    cl = strstr(r->head, "\r\nContent-Length: ");
    cr_assert_not_null(cl, "no Content-Length in %s", r->head);
    want = strtol(cl + 18, NULL, 10);
    cr_assert(want >= 0 && (size_t)want <= sizeof(r->body));
    while (r->len < (size_t)want) {
        ssize_t n = recv_wait(fd, r->body + r->len, (size_t)want - r->len);
        if (n <= 0)
            return r->status = -1;
        r->len += (size_t)n;
    }
    return r->status;
}

/* One request on a connection of its own, as Horovod makes them. */
static int http(const char *method, const char *path, const void *body,
                size_t len, struct resp *r)
{
    int fd = dial();
    int st_ = -1;

    if (send_req(fd, method, path, body, len) == 0)
        st_ = read_resp(fd, r);
    else
        r->status = -1;
    close(fd);
    return st_;
}

static int put(const char *path, const char *val)
{
    struct resp r;
    return http("PUT", path, val, strlen(val), &r);
}

static int get(const char *path, struct resp *r)
{
    return http("GET", path, NULL, 0, r);
}

static int del(const char *path)
{
    struct resp r;
    return http("DELETE", path, NULL, 0, &r);
}

static void expect_val(const char *path, const char *want)
{
    struct resp r;

    cr_assert_eq(get(path, &r), 200, "GET %s", path);
    cr_assert_eq(r.len, strlen(want), "GET %s", path);
    cr_assert_eq(memcmp(r.body, want, r.len), 0, "GET %s", path);
}

static void expect_missing(const char *path)
{
    struct resp r;
    cr_assert_eq(get(path, &r), 404, "GET %s", path);
    cr_assert_eq(r.len, 0);
}

/* 1 if the server closed fd within 5 s. */
static int closed_by_server(int fd)
{
    char c;
    ssize_t n = recv_wait(fd, &c, 1);
    return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* 1 if a GET from src gets no answer: the store refused the connection. */
static int refused_from(const char *src)
{
    struct resp r;
    int fd = dial_from(src);

    r.status = -1;
    if (send_req(fd, "GET", "/s/k", NULL, 0) == 0)
        read_resp(fd, &r);
    close(fd);
    return r.status == -1;
}

Test(gloo_store, put_then_get)
{
    start_lo();
    cr_assert_eq(put("/global/0", "hello"), 200);
    expect_val("/global/0", "hello");
    expect_missing("/global/1");
    expect_missing("/other/0");
}

Test(gloo_store, binary_and_empty_values)
{
    static const unsigned char bin[] = {0, 1, 0, 255, '\r', '\n', 0, 7};
    struct resp r;

    start_lo();
    cr_assert_eq(http("PUT", "/s/bin", bin, sizeof(bin), &r), 200);
    cr_assert_eq(get("/s/bin", &r), 200);
    cr_assert_eq(r.len, sizeof(bin));
    cr_assert_eq(memcmp(r.body, bin, sizeof(bin)), 0);
    /* Gloo's value for a scope of one rank is empty. */
    cr_assert_eq(http("PUT", "/s/empty", NULL, 0, &r), 200);
    cr_assert_eq(get("/s/empty", &r), 200);
    cr_assert_eq(r.len, 0);
}

Test(gloo_store, overwrite)
{
    start_lo();
    cr_assert_eq(put("/s/k", "first"), 200);
    cr_assert_eq(put("/s/k", "2nd"), 200);
    expect_val("/s/k", "2nd");
}

Test(gloo_store, declared_scope_clears_when_all_ranks_done)
{
    cr_assert_eq(hr_gloo_cfg_scope(&cfg, "global", 3, err, sizeof(err)), 0);
    start_lo();
    for (int round = 0; round < 2; round++) {
        cr_assert_eq(put("/global/0", "a"), 200);
        cr_assert_eq(put("/global/rank_0", "host"), 200);
        cr_assert_eq(del("/global/0"), 200);
        /* The same rank twice is still one rank. */
        cr_assert_eq(del("/global/0"), 200);
        cr_assert_eq(del("/global/1"), 200);
        expect_val("/global/0", "a");
        expect_val("/global/rank_0", "host");
        cr_assert_eq(del("/global/2"), 200);
        expect_missing("/global/0");
        expect_missing("/global/rank_0");
    }
    /* Not a rank of a scope of 3. */
    cr_assert_eq(del("/global/3"), 400);
    cr_assert_eq(del("/global/rank_1"), 400);
}

Test(gloo_store, adhoc_scope_deletes_one_key)
{
    const char *sc = "/global_process_set_hash_1f2e3d";
    char k0[64], r0[64];

    snprintf(k0, sizeof(k0), "%s/0", sc);
    snprintf(r0, sizeof(r0), "%s/rank_0", sc);
    start_lo();
    cr_assert_eq(put(k0, "addr"), 200);
    cr_assert_eq(put(r0, "host"), 200);
    cr_assert_eq(del(k0), 200);
    expect_missing(k0);
    expect_val(r0, "host");
    cr_assert_eq(del(r0), 200);
    expect_missing(r0);
    /* Deleting what is not there is no error, as in Horovod. */
    cr_assert_eq(del(k0), 200);
    cr_assert_eq(del("/nowhere/0"), 200);
}

Test(gloo_store, bad_paths_and_methods)
{
    static const char *paths[] = {"/", "/a", "/a/", "//b", "/a/b/c", NULL};
    struct resp r;

    start_lo();
    for (int i = 0; paths[i] != NULL; i++) {
        cr_expect_eq(http("GET", paths[i], NULL, 0, &r), 400, "GET %s",
                     paths[i]);
        cr_expect_eq(http("PUT", paths[i], "v", 1, &r), 400, "PUT %s",
                     paths[i]);
    }
    cr_expect_eq(http("POST", "/a/b", "v", 1, &r), 400);
    cr_expect_eq(http("OPTIONS", "/a/b", NULL, 0, &r), 400);
    expect_missing("/a/b");
    cr_expect_geq(hr_gloo_store_refusals(st), 12);
}

Test(gloo_store, too_long_names)
{
    char path[128];

    small_limits();
    start_lo();
    snprintf(path, sizeof(path), "/%s/k", "s23456789012345678901234567890123");
    cr_assert_eq(put(path, "v"), 414);
    snprintf(path, sizeof(path), "/s/%s", "k23456789012345678901234567890123");
    cr_assert_eq(put(path, "v"), 414);
    /* Exactly the limit is fine. */
    snprintf(path, sizeof(path), "/s/%s", "k2345678901234567890123456789012");
    cr_assert_eq(put(path, "v"), 200);
}

Test(gloo_store, value_over_limit_is_refused_early)
{
    char big[65];
    struct resp r;
    int fd;

    small_limits();
    start_lo();
    memset(big, 'x', sizeof(big));
    cr_assert_eq(http("PUT", "/s/k", big, 64, &r), 200);
    cr_assert_eq(http("PUT", "/s/k", big, 65, &r), 413);
    /*
     * A claimed terabyte is answered before any of it is sent: the
     * store never waits for, or buffers, a body over the limit.
     */
    fd = dial();
    cr_assert_eq(send_str(fd, "PUT /s/k HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              "Content-Length: 1000000000000\r\n\r\n"),
                 0);
    cr_assert_eq(read_resp(fd, &r), 413);
    cr_assert(closed_by_server(fd));
    close(fd);
    /* Streamed bodies have no size to check. */
    fd = dial();
    cr_assert_eq(send_str(fd, "PUT /s/k HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              "Transfer-Encoding: chunked\r\n\r\n"),
                 0);
    cr_assert_eq(read_resp(fd, &r), 411);
    close(fd);
    big[64] = '\0';
    expect_val("/s/k", big);
}

Test(gloo_store, key_count_limit)
{
    char path[32];

    small_limits();
    start_lo();
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof(path), "/s/%d", i);
        cr_assert_eq(put(path, "v"), 200);
    }
    cr_assert_eq(put("/s/4", "v"), 507);
    /* Overwriting a key takes no new one. */
    cr_assert_eq(put("/s/0", "w"), 200);
    cr_assert_eq(del("/s/0"), 200);
    cr_assert_eq(put("/s/4", "v"), 200);
    cr_assert_eq(put("/t/0", "v"), 507);
    cr_assert_geq(hr_gloo_store_refusals(st), 2);
}

Test(gloo_store, byte_limit)
{
    char val[65], path[32];
    int i, status = 200;

    small_limits();
    cfg.limits.keys_max = 100;
    start_lo();
    memset(val, 'v', 64);
    val[64] = '\0';
    /* Each key holds its path (5 bytes) and its value (64). */
    for (i = 0; i < 100 && status == 200; i++) {
        snprintf(path, sizeof(path), "/s/%02d", i);
        status = put(path, val);
    }
    cr_assert_eq(status, 507);
    cr_assert_eq(i - 1, 1024 / 69, "stored %d", i - 1);
    /* A smaller value still fits; a growing overwrite may not. */
    cr_assert_eq(put("/s/x", "v"), 200);
    expect_val("/s/00", val);
}

Test(gloo_store, peer_not_allowed_is_refused)
{

    start_lo();
    cr_assert(refused_from("127.0.0.9"));
    cr_assert_eq(hr_gloo_store_refusals(st), 1);
    cr_assert(!refused_from("127.0.0.1"));
}

Test(gloo_store, job_host_is_allowed)
{
    struct resp r;
    int fd;

    cr_assert_eq(hr_gloo_cfg_allow_host(&cfg, "127.0.0.9", err, sizeof(err)), 0,
                 "%s", err);
    start();
    fd = dial_from("127.0.0.9");
    cr_assert_eq(send_req(fd, "GET", "/s/k", NULL, 0), 0);
    cr_assert_eq(read_resp(fd, &r), 404);
    close(fd);
    /* Exact addresses: 127.0.0.1 was not named. */
    cr_assert(refused_from("127.0.0.1"));
    cr_assert_eq(hr_gloo_store_refusals(st), 1);
}

Test(gloo_store, self_is_allowed_exactly)
{

    cr_assert_eq(hr_gloo_cfg_allow_self(&cfg, err, sizeof(err)), 0, "%s", err);
    start();
    expect_missing("/s/k");
    cr_assert(refused_from("127.0.0.9"));
}

Test(gloo_store, user_prefix_and_bad_names)
{
    cr_assert_eq(
        hr_gloo_cfg_allow_host(&cfg, "someone@127.0.0.1", err, sizeof(err)), 0,
        "%s", err);
    cr_assert_eq(
        hr_gloo_cfg_allow_host(&cfg, "no-such-host.invalid", err, sizeof(err)),
        HVD_ESYS);
    cr_assert(strstr(err, "no-such-host.invalid") != NULL, "%s", err);
    cr_assert_eq(hr_gloo_cfg_scope(&cfg, "a/b", 2, err, sizeof(err)),
                 HVD_EINVAL);
    cr_assert_eq(hr_gloo_cfg_scope(&cfg, "a", 0, err, sizeof(err)), HVD_EINVAL);
    start();
    expect_missing("/s/k");
}

Test(gloo_store, per_ip_connection_limit)
{
    int fds[3];
    struct resp r;

    small_limits();
    cfg.limits.conns_per_ip = 2;
    cfg.limits.idle_timeout = 10;
    start_lo();
    fds[0] = dial();
    fds[1] = dial();
    /* Let the store take both in before the third arrives. */
    usleep(200 * 1000);
    fds[2] = dial();
    cr_assert(closed_by_server(fds[2]));
    close(fds[2]);
    close(fds[0]);
    close(fds[1]);
    usleep(200 * 1000);
    cr_assert_eq(get("/s/k", &r), 404);
    cr_assert_eq(hr_gloo_store_refusals(st), 1);
}

Test(gloo_store, idle_connection_is_closed)
{
    double t0;
    int fd;

    small_limits();
    start_lo();
    fd = dial();
    t0 = now();
    cr_assert(closed_by_server(fd));
    cr_assert_lt(now() - t0, 4.0);
    close(fd);
}

Test(gloo_store, closes_after_each_answer_by_default)
{
    struct resp r;
    int fd;

    start_lo();
    fd = dial();
    cr_assert_eq(send_req(fd, "GET", "/s/k", NULL, 0), 0);
    cr_assert_eq(read_resp(fd, &r), 404);
    cr_assert(strstr(r.head, "\r\nConnection: close\r\n") != NULL, "%s",
              r.head);
    cr_assert(closed_by_server(fd));
    close(fd);
}

Test(gloo_store, keep_alive)
{
    struct resp r;
    int fd;

    cfg.keep_alive = 1;
    cr_assert_eq(hr_gloo_cfg_scope(&cfg, "global", 1, err, sizeof(err)), 0);
    start_lo();
    fd = dial();
    cr_assert_eq(send_req(fd, "PUT", "/global/0", "abc", 3), 0);
    cr_assert_eq(read_resp(fd, &r), 200);
    cr_assert_eq(send_req(fd, "GET", "/global/0", NULL, 0), 0);
    cr_assert_eq(read_resp(fd, &r), 200);
    cr_assert_eq(r.len, 3);
    cr_assert_eq(memcmp(r.body, "abc", 3), 0);
    cr_assert_eq(send_req(fd, "DELETE", "/global/0", NULL, 0), 0);
    cr_assert_eq(read_resp(fd, &r), 200);
    cr_assert_eq(send_req(fd, "GET", "/global/0", NULL, 0), 0);
    cr_assert_eq(read_resp(fd, &r), 404);
    /* Two requests in one write are answered in turn. */
    cr_assert_eq(send_str(fd, "PUT /s/k HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              "Content-Length: 2\r\n\r\nhi"
                              "GET /s/k HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              "Content-Length: 0\r\n\r\n"),
                 0);
    cr_assert_eq(read_resp(fd, &r), 200);
    cr_assert_eq(read_resp(fd, &r), 200);
    cr_assert_eq(r.len, 2);
    close(fd);
}

/* Waits for a key as Horovod's HTTPStore::wait does: GET until found. */
static void *poller(void *arg)
{
    const char *path = arg;
    struct resp r;
    int n = 0;

    while (get(path, &r) == 404 && n < 2000) {
        usleep(1000);
        n++;
    }
    return r.status == 200 ? (void *)path : NULL;
}

Test(gloo_store, many_short_connections)
{
    pthread_t t[4];
    struct resp r;

    start_lo();
    for (int i = 0; i < 300; i++)
        cr_assert_eq(get("/global/7", &r), 404, "request %d", i);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, poller, "/global/7"), 0);
    usleep(100 * 1000);
    cr_assert_eq(put("/global/7", "found"), 200);
    for (int i = 0; i < 4; i++) {
        void *ret;
        pthread_join(t[i], &ret);
        cr_assert_not_null(ret, "poller %d", i);
    }
    cr_assert_eq(hr_gloo_store_refusals(st), 0);
}

/* One client of the concurrent test: its own keys, in turn. */
static void *client(void *arg)
{
    int id = (int)(intptr_t)arg;
    char path[64], val[32];
    struct resp r;

    for (int i = 0; i < 50; i++) {
        snprintf(path, sizeof(path), "/global_process_set_hash_%d/%d", id,
                 i % 5);
        snprintf(val, sizeof(val), "v%d.%d", id, i);
        if (http("PUT", path, val, strlen(val), &r) != 200 ||
            get(path, &r) != 200 || r.len != strlen(val) ||
            memcmp(r.body, val, r.len) != 0 || del(path) != 200)
            return NULL;
    }
    return arg;
}

static void *intruder(void *arg)
{
    for (int i = 0; i < 20; i++)
        if (!refused_from("127.0.0.9"))
            return NULL;
    return arg;
}

Test(gloo_store, concurrent_clients_and_refusals)
{
    pthread_t t[5];
    unsigned long seen = 0, n;

    cfg.keep_alive = 1;
    start_lo();
    for (int i = 0; i < 4; i++)
        cr_assert_eq(
            pthread_create(&t[i], NULL, client, (void *)(intptr_t)(i + 1)), 0);
    cr_assert_eq(pthread_create(&t[4], NULL, intruder, (void *)(intptr_t)9), 0);
    /* The count only grows, read while the store's thread writes it. */
    for (int i = 0; i < 100; i++) {
        n = hr_gloo_store_refusals(st);
        cr_assert_geq(n, seen);
        seen = n;
        usleep(1000);
    }
    for (int i = 0; i < 5; i++) {
        void *ret;
        pthread_join(t[i], &ret);
        cr_assert_not_null(ret, "client %d", i);
    }
    cr_assert_eq(hr_gloo_store_refusals(st), 20);
    for (int i = 1; i <= 4; i++) {
        char path[64];
        snprintf(path, sizeof(path), "/global_process_set_hash_%d/0", i);
        expect_missing(path);
    }
}

Test(gloo_store, close_with_connections_open)
{
    int idle, partial, done;
    struct resp r;

    start_lo();
    idle = dial();
    partial = dial();
    cr_assert_eq(send_str(partial, "PUT /s/k HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                   "Content-Length: 50\r\n\r\n0123456789"),
                 0);
    done = dial();
    cr_assert_eq(send_req(done, "GET", "/s/k", NULL, 0), 0);
    cr_assert_eq(read_resp(done, &r), 404);
    usleep(100 * 1000);
    hr_gloo_store_close(st);
    st = NULL;
    cr_assert(closed_by_server(idle));
    cr_assert(closed_by_server(partial));
    close(idle);
    close(partial);
    close(done);
}

Test(gloo_store, plan_scopes)
{
    struct hvd_hostlist hl;
    struct hvd_plan p = {0};
    struct hr_gloo_limits def = cfg.limits;

    hvd_hostlist_init(&hl);
    cr_assert_eq(hvd_hostlist_add(&hl, "h0", 2), 0);
    cr_assert_eq(hvd_hostlist_add(&hl, "h1", 1), 0);
    cr_assert_eq(hvd_plan_build(&p, &hl, 3), 0);
    cr_assert_eq(hr_gloo_cfg_plan(&cfg, &p, &hl, err, sizeof(err)), 0, "%s",
                 err);
    cr_assert_geq(cfg.limits.value_max, def.value_max);
    cr_assert_geq(cfg.limits.bytes_max, def.bytes_max);
    cr_assert_geq(cfg.limits.keys_max, def.keys_max);
    start_lo();
    /* local_h0 has 2 ranks; local_h1 and cross_1 have one. */
    cr_assert_eq(put("/local_h0/0", "a"), 200);
    cr_assert_eq(del("/local_h0/0"), 200);
    expect_val("/local_h0/0", "a");
    cr_assert_eq(del("/local_h0/2"), 400);
    cr_assert_eq(del("/local_h0/1"), 200);
    expect_missing("/local_h0/0");
    cr_assert_eq(put("/local_h1/0", "b"), 200);
    cr_assert_eq(del("/local_h1/0"), 200);
    expect_missing("/local_h1/0");
    cr_assert_eq(put("/cross_0/0", "c"), 200);
    cr_assert_eq(del("/cross_0/1"), 200);
    expect_val("/cross_0/0", "c");
    cr_assert_eq(del("/cross_0/0"), 200);
    expect_missing("/cross_0/0");
    cr_assert_eq(del("/cross_1/1"), 400);
    cr_assert_eq(put("/global/2", "d"), 200);
    cr_assert_eq(del("/global/2"), 200);
    expect_val("/global/2", "d");
    hvd_plan_close(&p);
    hvd_hostlist_close(&hl);
}

Test(gloo_store, plan_sizes_limits_for_large_jobs)
{
    struct hvd_hostlist hl;
    struct hvd_plan p = {0};
    char name[32];

    hvd_hostlist_init(&hl);
    for (int h = 0; h < 512; h++) {
        snprintf(name, sizeof(name), "node%03d", h);
        cr_assert_eq(hvd_hostlist_add(&hl, name, 8), 0);
    }
    cr_assert_eq(hvd_plan_build(&p, &hl, 4096), 0);
    cr_assert_eq(hr_gloo_cfg_plan(&cfg, &p, &hl, err, sizeof(err)), 0, "%s",
                 err);
    /* A rank's value names 4095 peers at 136 bytes each. */
    cr_assert_geq(cfg.limits.value_max, (size_t)136 * 4095);
    /* The global scope alone holds 4096 such values. */
    cr_assert_geq(cfg.limits.bytes_max, (size_t)136 * 4095 * 4096);
    cr_assert_geq(cfg.limits.keys_max, (size_t)6 * 4096);
    cr_assert_geq(cfg.limits.conns_per_ip, 16);
    hvd_plan_close(&p);
    hvd_hostlist_close(&hl);
}

Test(gloo_store, scope_declared_with_two_sizes)
{
    cr_assert_eq(hr_gloo_cfg_scope(&cfg, "global", 2, err, sizeof(err)), 0);
    cr_assert_eq(hr_gloo_cfg_scope(&cfg, "global", 2, err, sizeof(err)), 0);
    cr_assert_eq(hr_gloo_cfg_scope(&cfg, "global", 3, err, sizeof(err)), 0);
    cr_assert_eq(
        hr_gloo_store_start(&st, &cfg, "127.0.0.1", 0, &port, err, sizeof(err)),
        HVD_EDUP);
    cr_assert_null(st);
    cr_assert(strstr(err, "global") != NULL, "%s", err);
}

Test(gloo_store, bad_arguments)
{
    cr_assert_eq(
        hr_gloo_store_start(&st, &cfg, "localhost", 0, &port, err, sizeof(err)),
        HVD_EINVAL);
    cr_assert_eq(hr_gloo_store_start(&st, &cfg, "127.0.0.1", 70000, &port, err,
                                     sizeof(err)),
                 HVD_EINVAL);
    cfg.limits.idle_timeout = 0;
    cr_assert_eq(
        hr_gloo_store_start(&st, &cfg, "127.0.0.1", 0, &port, err, sizeof(err)),
        HVD_EINVAL);
    cr_assert_null(st);
    hr_gloo_store_close(NULL);
    hr_gloo_cfg_close(NULL);
    cr_assert_eq(hr_gloo_store_refusals(NULL), 0);
}

Test(gloo_store, fixed_port)
{
    int first;

    start_lo();
    first = port;
    hr_gloo_store_close(st);
    st = NULL;
    /* The port is free again once the store is closed. */
    cr_assert_eq(hr_gloo_store_start(&st, &cfg, "127.0.0.1", first, &port, err,
                                     sizeof(err)),
                 0, "%s", err);
    cr_assert_eq(port, first);
    expect_missing("/s/k");
}

/*
 * An IPv6 socket bound to an IPv4-mapped address serves IPv4 peers, which
 * it sees as ::ffff:a.b.c.d: the allow list still matches them exactly.
 */
Test(gloo_store, ipv4_mapped_peers)
{
    int rc;

    cr_assert_eq(hr_gloo_cfg_allow_host(&cfg, "127.0.0.1", err, sizeof(err)),
                 0);
    rc = hr_gloo_store_start(&st, &cfg, "::ffff:127.0.0.1", 0, &port, err,
                             sizeof(err));
    if (rc == HVD_ESYS)
        cr_skip_test("no IPv6 here: %s", err);
    cr_assert_eq(rc, 0, "%s", err);
    expect_missing("/s/k");
    cr_assert(refused_from("127.0.0.9"));
}

Test(gloo_store, ipv6_loopback)
{
    struct sockaddr_in6 a;
    struct resp r;
    int fd, rc;

    cr_assert_eq(hr_gloo_cfg_allow_host(&cfg, "::1", err, sizeof(err)), 0);
    rc = hr_gloo_store_start(&st, &cfg, "::1", 0, &port, err, sizeof(err));
    if (rc == HVD_ESYS)
        cr_skip_test("no IPv6 loopback here: %s", err);
    cr_assert_eq(rc, 0, "%s", err);
    fd = socket(AF_INET6, SOCK_STREAM, 0);
    memset(&a, 0, sizeof(a));
    a.sin6_family = AF_INET6;
    a.sin6_port = htons((uint16_t)port);
    a.sin6_addr = in6addr_loopback;
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(send_req(fd, "PUT", "/s/k", "v6", 2), 0);
    cr_assert_eq(read_resp(fd, &r), 200);
    close(fd);
}

#if defined(__SANITIZE_THREAD__)
#define HR_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HR_TSAN 1
#endif
#endif

#ifdef HR_TSAN
/*
 * Criterion's runner cannot start under ThreadSanitizer (no unit test's
 * can), so that build runs the tests from this main of its own, one after
 * another in one process; a failed assertion aborts it. The IPv6 tests,
 * which may skip, are left to the other builds.
 */
static void run(const char *name, void (*fn)(void))
{
    fprintf(stderr, "gloo_store: %s\n", name);
    setup();
    fn();
    teardown();
}

#define RUN(name) run(#name, gloo_store_##name##_impl)

int main(void)
{
    RUN(put_then_get);
    RUN(binary_and_empty_values);
    RUN(overwrite);
    RUN(declared_scope_clears_when_all_ranks_done);
    RUN(adhoc_scope_deletes_one_key);
    RUN(bad_paths_and_methods);
    RUN(too_long_names);
    RUN(value_over_limit_is_refused_early);
    RUN(key_count_limit);
    RUN(byte_limit);
    RUN(peer_not_allowed_is_refused);
    RUN(job_host_is_allowed);
    RUN(self_is_allowed_exactly);
    RUN(user_prefix_and_bad_names);
    RUN(per_ip_connection_limit);
    RUN(idle_connection_is_closed);
    RUN(closes_after_each_answer_by_default);
    RUN(keep_alive);
    RUN(many_short_connections);
    RUN(concurrent_clients_and_refusals);
    RUN(close_with_connections_open);
    RUN(plan_scopes);
    RUN(plan_sizes_limits_for_large_jobs);
    RUN(scope_declared_with_two_sizes);
    RUN(bad_arguments);
    RUN(fixed_port);
    fprintf(stderr, "gloo_store: all passed\n");
    return 0;
}
#endif
