/* One non-blocking libssh2 session per remote host, driven by uv_poll:
 * resolve, connect, handshake, host key, authentication, then the agent's
 * channel carries frames both ways. */
#include "launcher/link/ssh.h"

#include <errno.h>
#include <libssh2.h>
#include <limits.h>
#include <netdb.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "launcher/lib/log.h"
#include "launcher/link/known_hosts.h"
#include "launcher/link/link.h"
#include "launcher/link/ssh_target.h"

enum stage {
    ST_IDLE,
    ST_RETRY, /* waiting to resolve and connect again */
    ST_RESOLVE,
    ST_CONNECT,
    ST_HANDSHAKE,
    ST_AUTH_LIST,
    ST_AUTH_AGENT,
    ST_AUTH_FILE,
    ST_CHANNEL,
    ST_EXEC,
    ST_RUN,
    ST_CLOSE,
    ST_DONE
};

struct outq {
    uint8_t *data;
    size_t len, off;
    struct outq *next;
};

struct hr_ssh {
    struct hr_agent *a;
    struct hr_ssh_cfg cfg; /* the strings are the caller's */
    uv_loop_t *loop;
    enum stage st;
    struct hr_ssh_target t; /* user, host, port, keys, host key policy */
    char cfg_err[300];      /* why the ssh config cannot be used */
    uv_getaddrinfo_t gai;
    struct addrinfo *ai, *ai_next;
    int fd;
    uv_poll_t poll;
    int poll_open;
    uv_timer_t defer; /* ends the link outside of the caller's stack */
    int defer_open;
    /* The next try (ST_RETRY), or the end of a try's ConnectTimeout
     * (ST_CONNECT). */
    uv_timer_t retry;
    uint64_t t0;       /* when the link started, loop time */
    int backoff_ms;    /* before the next try */
    char waiting[200]; /* what the link waits for, as a->stage */
    LIBSSH2_SESSION *session;
    LIBSSH2_CHANNEL *channel;
    LIBSSH2_AGENT *agent;
    struct libssh2_agent_publickey *identity;
    int key; /* the next of t.keys to try */
    char tried[1024];
    struct outq *qhead, *qtail;
    char errline[512]; /* the remote shell's last stderr line */
    size_t errlen;
    int paused; /* the channel is not read: the terminal is behind */
};

static int inited;

/* Pauses between tries to reach a host that is not there yet. */
#define RETRY_FIRST_MS 100
#define RETRY_MAX_MS 2000

static void step(struct hr_ssh *s);

struct hr_ssh *hr_ssh_new(struct hr_agent *a, const struct hr_ssh_cfg *cfg)
{
    struct hr_ssh *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    if (!inited && libssh2_init(0) == 0)
        inited = 1;
    s->a = a;
    s->cfg = *cfg;
    s->fd = -1;
    struct passwd *pw = getpwuid(getuid());
    const char *home = getenv("HOME"), *u = getenv("USER");
    if (home == NULL || home[0] == '\0')
        home = pw ? pw->pw_dir : "/";
    if (hr_ssh_target(a->name, cfg, home, pw ? pw->pw_name : (u ? u : "root"),
                      &s->t, s->cfg_err, sizeof(s->cfg_err)) == 0 &&
        s->t.note[0])
        hvd_log_info("host %s: %s", a->name, s->t.note);
    return s;
}

static void free_queue(struct hr_ssh *s)
{
    while (s->qhead) {
        struct outq *q = s->qhead;
        s->qhead = q->next;
        free(q->data);
        free(q);
    }
    s->qtail = NULL;
}

static void nothing(uv_handle_t *h)
{
    (void)h;
}

static void teardown(struct hr_ssh *s)
{
    if (s->st == ST_RESOLVE)
        uv_cancel((uv_req_t *)&s->gai);
    if (s->defer_open)
        uv_timer_stop(&s->retry);
    /* The poll handle goes before its socket, as libuv requires. */
    if (s->poll_open) {
        uv_close((uv_handle_t *)&s->poll, nothing);
        s->poll_open = 0;
    }
    /* With the socket shut down nothing below can block or wait for the
     * peer, and blocking mode makes libssh2 free everything now instead
     * of asking to be called again. */
    if (s->fd >= 0)
        shutdown(s->fd, SHUT_RDWR);
    if (s->session)
        libssh2_session_set_blocking(s->session, 1);
    if (s->channel)
        libssh2_channel_free(s->channel);
    if (s->agent) {
        libssh2_agent_disconnect(s->agent);
        libssh2_agent_free(s->agent);
    }
    if (s->session)
        libssh2_session_free(s->session);
    s->channel = NULL;
    s->agent = NULL;
    s->session = NULL;
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
    if (s->ai)
        uv_freeaddrinfo(s->ai);
    s->ai = NULL;
    free_queue(s);
}

void hr_ssh_free(struct hr_ssh *s)
{
    if (s == NULL)
        return;
    teardown(s);
    free(s);
}

int hr_ssh_addr(const struct hr_ssh *s, int local, char *out, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (s == NULL || s->fd < 0 ||
        (local ? getsockname(s->fd, (struct sockaddr *)&ss, &sl)
               : getpeername(s->fd, (struct sockaddr *)&ss, &sl)) != 0)
        return -1;
    return getnameinfo((struct sockaddr *)&ss, sl, out, (socklen_t)len, NULL, 0,
                       NI_NUMERICHOST) == 0
               ? 0
               : -1;
}

static void on_deferred_end(uv_timer_t *t)
{
    struct hr_ssh *s = t->data;
    s->a->cb->ended(s->a);
}

/* The session is over (failed, killed or finished): report it once, from
 * the loop, so callers never see the agent end under their feet. */
static void finish(struct hr_ssh *s)
{
    if (s->st == ST_DONE)
        return;
    s->st = ST_DONE;
    s->a->running = s->a->reading = 0;
    if (s->poll_open)
        uv_poll_stop(&s->poll);
    uv_timer_start(&s->defer, on_deferred_end, 0, 0);
}

static void fail(struct hr_ssh *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void fail(struct hr_ssh *s, const char *fmt, ...)
{
    if (s->a->failure[0] == '\0') {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->a->failure, sizeof(s->a->failure), fmt, ap);
        va_end(ap);
    }
    teardown(s);
    finish(s);
}

static void resolve(struct hr_ssh *s);
static void try_connect_next(struct hr_ssh *s, int err);

static void on_retry(uv_timer_t *t)
{
    struct hr_ssh *s = t->data;
    if (s->st == ST_RETRY) {
        resolve(s);
        return;
    }
    /* ST_CONNECT: ConnectTimeout passed; the next address, or later. */
    uv_close((uv_handle_t *)&s->poll, nothing);
    s->poll_open = 0;
    close(s->fd);
    s->fd = -1;
    try_connect_next(s, ETIMEDOUT);
}

/*
 * The host is not there yet (a name that does not resolve, no sshd):
 * tries again after a growing pause, until --start-timeout has passed
 * since the link started (without that budget, fails at once). fmt says
 * what went wrong; short_why says it in the start-up line.
 */
static void retry(struct hr_ssh *s, const char *short_why, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void retry(struct hr_ssh *s, const char *short_why, const char *fmt, ...)
{
    char why[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    uint64_t spent = uv_now(s->loop) - s->t0;
    if (s->cfg.retry_s <= 0) {
        fail(s, "%s", why);
        return;
    }
    snprintf(s->waiting, sizeof(s->waiting), "trying again: %s", why);
    if ((double)(spent + (uint64_t)s->backoff_ms) > s->cfg.retry_s * 1000.0) {
        fail(s, "timed out after %g s while %s (--start-timeout)",
             s->cfg.retry_s, s->waiting);
        return;
    }
    teardown(s);
    s->st = ST_RETRY;
    s->a->stage = s->waiting;
    s->a->retrying = short_why;
    uv_timer_start(&s->retry, on_retry, (uint64_t)s->backoff_ms, 0);
    s->backoff_ms =
        s->backoff_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : s->backoff_ms * 2;
}

static const char *ssh_error(struct hr_ssh *s)
{
    char *m = NULL;
    if (s->session)
        libssh2_session_last_error(s->session, &m, NULL, 0);
    return m && m[0] ? m : "unknown error";
}

static void on_poll(uv_poll_t *p, int status, int events)
{
    struct hr_ssh *s = p->data;
    (void)events;
    /* While connecting, SO_ERROR says what went wrong (refused...). */
    if (status < 0 && s->st != ST_CONNECT) {
        fail(s, "connection error: %s", uv_strerror(status));
        return;
    }
    step(s);
}

/* Waits for the socket to become ready the way libssh2 (or the output
 * queue) needs it. */
static void wait_io(struct hr_ssh *s, int extra)
{
    int ev = extra;
    if (s->session) {
        int dir = libssh2_session_block_directions(s->session);
        if (dir & LIBSSH2_SESSION_BLOCK_INBOUND)
            ev |= UV_READABLE;
        if (dir & LIBSSH2_SESSION_BLOCK_OUTBOUND)
            ev |= UV_WRITABLE;
    }
    if (ev == 0)
        ev = UV_READABLE;
    uv_poll_start(&s->poll, ev, on_poll);
}

static int again(int rc)
{
    return rc == LIBSSH2_ERROR_EAGAIN;
}

/* For calls that return NULL both on failure and when they would block. */
static int again_null(struct hr_ssh *s)
{
    return libssh2_session_last_errno(s->session) == LIBSSH2_ERROR_EAGAIN;
}

static void try_connect(struct hr_ssh *s);

/* Whether a failed connect means the host may come up later. */
static int transient(int err)
{
    return err == ECONNREFUSED || err == EHOSTUNREACH || err == ENETUNREACH ||
           err == ETIMEDOUT || err == EHOSTDOWN || err == ECONNRESET;
}

/* After a failed connect: the next address, else a retry or the end. */
static void try_connect_next(struct hr_ssh *s, int err)
{
    if (s->ai_next) {
        try_connect(s);
        return;
    }
    if (err == ECONNREFUSED)
        retry(s, "no sshd yet",
              "connection refused (port %d); is sshd running there?",
              s->t.port);
    else if (transient(err))
        retry(s, "unreachable", "cannot connect to port %d: %s", s->t.port,
              strerror(err));
    else
        fail(s, "cannot connect to port %d: %s", s->t.port, strerror(err));
}

static void try_connect(struct hr_ssh *s)
{
    int err = 0;
    for (; s->ai_next; s->ai_next = s->ai_next->ai_next) {
        struct addrinfo *ai = s->ai_next;
        s->fd = socket(ai->ai_family,
                       SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (s->fd < 0)
            continue;
        if (connect(s->fd, ai->ai_addr, ai->ai_addrlen) == 0 ||
            errno == EINPROGRESS) {
            s->ai_next = ai->ai_next;
            s->st = ST_CONNECT;
            if (uv_poll_init_socket(s->loop, &s->poll, s->fd) != 0) {
                fail(s, "cannot watch the connection");
                return;
            }
            s->poll.data = s;
            s->poll_open = 1;
            uv_poll_start(&s->poll, UV_WRITABLE, on_poll);
            if (s->t.connect_timeout_s > 0)
                uv_timer_start(&s->retry, on_retry,
                               (uint64_t)s->t.connect_timeout_s * 1000, 0);
            return;
        }
        err = errno;
        close(s->fd);
        s->fd = -1;
    }
    try_connect_next(s, err);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    struct hr_ssh *s = req->data;
    if (s->st != ST_RESOLVE) {
        if (res)
            uv_freeaddrinfo(res);
        return;
    }
    if (status == UV_EAI_NONAME || status == UV_EAI_AGAIN ||
        status == UV_EAI_NODATA || status == UV_EAI_FAIL) {
        /* A pod's name appears once the pod runs. */
        retry(s, "unresolved", "cannot resolve the name: %s",
              uv_strerror(status));
        return;
    }
    if (status < 0) {
        fail(s, "cannot resolve the name: %s", uv_strerror(status));
        return;
    }
    s->ai = s->ai_next = res;
    /* While retrying, the stage keeps saying why. */
    if (s->a->retrying == NULL)
        s->a->stage = "connecting";
    try_connect(s);
}

static void connected(struct hr_ssh *s)
{
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err == EINPROGRESS || err == EALREADY)
        return;
    uv_timer_stop(&s->retry);
    if (err != 0) {
        uv_close((uv_handle_t *)&s->poll, nothing);
        s->poll_open = 0;
        close(s->fd);
        s->fd = -1;
        try_connect_next(s, err);
        return;
    }
    s->a->retrying = NULL;
    s->session = libssh2_session_init();
    if (s->session == NULL) {
        fail(s, "cannot create an SSH session");
        return;
    }
    libssh2_session_set_blocking(s->session, 0);
    s->st = ST_HANDSHAKE;
    s->a->stage = "exchanging keys";
}

static void add_tried(struct hr_ssh *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void add_tried(struct hr_ssh *s, const char *fmt, ...)
{
    size_t n = strlen(s->tried);
    va_list ap;
    if (n > 0 && n < sizeof(s->tried) - 2) {
        strcpy(s->tried + n, ", ");
        n += 2;
    }
    va_start(ap, fmt);
    vsnprintf(s->tried + n, sizeof(s->tried) - n, fmt, ap);
    va_end(ap);
}

/* Starts ssh-agent authentication if there is an agent to ask. */
static void start_agent_auth(struct hr_ssh *s)
{
    s->st = ST_AUTH_FILE;
    if (getenv("SSH_AUTH_SOCK") == NULL)
        return;
    s->agent = libssh2_agent_init(s->session);
    if (s->agent == NULL || libssh2_agent_connect(s->agent) != 0 ||
        libssh2_agent_list_identities(s->agent) != 0) {
        add_tried(s, "ssh-agent (not reachable)");
        return;
    }
    s->identity = NULL;
    if (libssh2_agent_get_identity(s->agent, &s->identity, NULL) != 0) {
        add_tried(s, "ssh-agent (no keys)");
        return;
    }
    s->st = ST_AUTH_AGENT;
}

static void start_channel(struct hr_ssh *s)
{
    s->st = ST_CHANNEL;
    s->a->stage = "starting hvd-agent";
}

/* Whether key is an RSA key that this libssh2 can only sign with SHA-1
 * (ssh-rsa): rsa-sha2 user authentication came with libssh2 1.11. */
static int rsa_sha1_only(const char *key)
{
    char pub[PATH_MAX + 8], line[64] = "";
    FILE *f;
    if (libssh2_version(0x010b00) != NULL)
        return 0;
    snprintf(pub, sizeof(pub), "%s.pub", key);
    if ((f = fopen(pub, "r")) == NULL && (f = fopen(key, "r")) == NULL)
        return 0;
    if (fgets(line, sizeof(line), f) == NULL)
        line[0] = '\0';
    fclose(f);
    return strncmp(line, "ssh-rsa ", 8) == 0 ||
           strncmp(line, "-----BEGIN RSA PRIVATE KEY", 26) == 0;
}

static int step_auth(struct hr_ssh *s)
{
    int rc;
    if (s->st == ST_AUTH_LIST) {
        char *methods =
            libssh2_userauth_list(s->session, s->t.user, strlen(s->t.user));
        if (methods == NULL && again_null(s))
            return 1;
        if (methods == NULL) {
            if (libssh2_userauth_authenticated(s->session)) {
                start_channel(s);
                return 0;
            }
            fail(s, "authentication failed for user %s: %s", s->t.user,
                 ssh_error(s));
            return 1;
        }
        if (strstr(methods, "publickey") == NULL) {
            fail(s,
                 "authentication failed for user %s: the server takes only "
                 "%s, and horovodrun uses keys (ssh-agent, -i, ~/.ssh/id_*)",
                 s->t.user, methods);
            return 1;
        }
        start_agent_auth(s);
        return 0;
    }
    if (s->st == ST_AUTH_AGENT) {
        rc = libssh2_agent_userauth(s->agent, s->t.user, s->identity);
        if (again(rc))
            return 1;
        if (rc == 0) {
            start_channel(s);
            return 0;
        }
        struct libssh2_agent_publickey *next = NULL;
        if (libssh2_agent_get_identity(s->agent, &next, s->identity) == 0) {
            s->identity = next;
            return 0;
        }
        add_tried(s, "ssh-agent keys (rejected)");
        s->st = ST_AUTH_FILE;
        return 0;
    }
    /* ST_AUTH_FILE */
    if (s->key >= s->t.nkeys) {
        if (s->t.nkeys == 0)
            add_tried(s, "no key files (~/.ssh/id_ed25519, id_ecdsa, "
                         "id_rsa missing; no -i)");
        fail(s, "authentication failed for user %s; tried: %s", s->t.user,
             s->tried);
        return 1;
    }
    const char *key = s->t.keys[s->key];
    if (access(key, R_OK) != 0) {
        add_tried(s, "%s (%s)", key, strerror(errno));
        s->key++;
        return 0;
    }
    rc = libssh2_userauth_publickey_fromfile_ex(
        s->session, s->t.user, (unsigned)strlen(s->t.user), NULL, key, NULL);
    if (again(rc))
        return 1;
    if (rc == 0) {
        start_channel(s);
        return 0;
    }
    add_tried(s, "%s (%s)", key,
              rc == LIBSSH2_ERROR_FILE ||
                      rc == LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED
                  ? "unreadable, or needs a passphrase"
              : rsa_sha1_only(key)
                  ? "rejected: this libssh2 signs RSA keys with SHA-1, which "
                    "OpenSSH 8.8 and later refuse; use an ed25519 or ECDSA "
                    "key, or --rsh-agent ssh"
                  : "rejected");
    s->key++;
    return 0;
}

/* Single quotes for the remote shell. */
static void shell_quote(char *out, size_t len, const char *in)
{
    size_t o = 0;
    if (len < 3)
        return;
    out[o++] = '\'';
    for (; *in && o + 5 < len; in++) {
        if (*in == '\'') {
            memcpy(out + o, "'\\''", 4);
            o += 4;
        } else {
            out[o++] = *in;
        }
    }
    out[o++] = '\'';
    out[o] = '\0';
}

static int step_channel(struct hr_ssh *s)
{
    if (s->st == ST_CHANNEL) {
        s->channel = libssh2_channel_open_session(s->session);
        if (s->channel == NULL && again_null(s))
            return 1;
        if (s->channel == NULL) {
            fail(s, "cannot open an SSH channel: %s", ssh_error(s));
            return 1;
        }
        s->st = ST_EXEC;
    }
    char path[PATH_MAX], quoted[2 * PATH_MAX], cmd[2 * PATH_MAX + 16];
    const char *ap = s->cfg.agent_path;
    if (ap == NULL &&
        hr_link_sibling_path("hvd-agent", path, sizeof(path)) == 0)
        ap = path;
    shell_quote(quoted, sizeof(quoted), ap ? ap : "hvd-agent");
    /* Only the agent's path is on the command line; the job, its
     * environment and its secret go through the channel. */
    snprintf(cmd, sizeof(cmd), "exec %s", quoted);
    int rc = libssh2_channel_exec(s->channel, cmd);
    if (again(rc))
        return 1;
    if (rc != 0) {
        fail(s, "cannot run %s: %s", ap, ssh_error(s));
        return 1;
    }
    s->st = ST_RUN;
    s->a->running = s->a->reading = 1;
    hvd_log_info("host %s: started hvd-agent over SSH for %u ranks", s->a->name,
                 s->a->nranks);
    return 0;
}

/* The remote agent's (or shell's) stderr: shown once the agent is up,
 * kept for the pre-flight message before. */
static void handle_stderr(struct hr_ssh *s, const char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (buf[i] != '\n' && s->errlen < sizeof(s->errline) - 1) {
            s->errline[s->errlen++] = buf[i];
            continue;
        }
        if (buf[i] != '\n')
            continue;
        s->errline[s->errlen] = '\0';
        if (s->a->hello)
            hvd_log_warn("host %s: %s", s->a->name, s->errline);
        s->errlen = 0;
    }
}

static void ended(struct hr_ssh *s)
{
    struct hr_agent *a = s->a;
    char *sig = NULL;
    a->status = libssh2_channel_get_exit_status(s->channel);
    libssh2_channel_get_exit_signal(s->channel, &sig, NULL, NULL, NULL, NULL,
                                    NULL);
    a->term_signal = 0;
    for (int i = 1; sig && i < NSIG; i++)
        if (sigabbrev_np(i) && strcmp(sigabbrev_np(i), sig) == 0)
            a->term_signal = i;
    if (sig)
        libssh2_free(s->session, sig);
    s->errline[s->errlen] = '\0';
    if (!a->hello && (a->status == 127 || a->status == 126))
        snprintf(a->failure, sizeof(a->failure),
                 "hvd-agent %s at %.200s (remote shell: %.150s); install it "
                 "there or "
                 "pass --agent-path",
                 a->status == 127 ? "not found" : "not executable",
                 s->cfg.agent_path ? s->cfg.agent_path
                                   : "the same path as here",
                 s->errline[0] ? s->errline : "no message");
    teardown(s);
    finish(s);
}

/* Whether libssh2 holds channel data that it took off the socket while
 * doing something else: a stderr read takes the stdout packets that came
 * meanwhile, and a write reads every packet that came. No poll of the
 * socket would see those. */
static int data_held(struct hr_ssh *s)
{
    return libssh2_poll_channel_read(s->channel, 1) > 0;
}

static void step_run(struct hr_ssh *s)
{
    char buf[65536];
    ssize_t n = 0;
    int passes = 0;

again:
    /* While paused the channel is not read at all: a read also widens the
     * channel's window, which would let the agent send without limit. Its
     * frames wait in the window (at most libssh2's 2 MiB) and in sshd, and
     * the agent stops reading its ranks. Writes go on, so the agent keeps
     * hearing PING. */
    while (s->st == ST_RUN && !s->paused &&
           (n = libssh2_channel_read(s->channel, buf, sizeof(buf))) > 0)
        s->a->cb->bytes(s->a, buf, (size_t)n);
    if (s->st != ST_RUN)
        return;
    if (n < 0 && n != LIBSSH2_ERROR_EAGAIN) {
        fail(s, "lost the SSH connection: %s", ssh_error(s));
        return;
    }
    while (!s->paused &&
           (n = libssh2_channel_read_stderr(s->channel, buf, sizeof(buf))) > 0)
        handle_stderr(s, buf, (size_t)n);
    while (s->qhead) {
        struct outq *q = s->qhead;
        n = libssh2_channel_write(s->channel, (char *)q->data + q->off,
                                  q->len - q->off);
        /* 0: the agent's window is full, and libssh2 said so as a
         * write of nothing. */
        if (n == LIBSSH2_ERROR_EAGAIN || n == 0)
            break;
        if (n < 0) {
            fail(s, "lost the SSH connection: %s", ssh_error(s));
            return;
        }
        q->off += (size_t)n;
        if (q->off < q->len)
            continue;
        s->qhead = q->next;
        if (s->qhead == NULL)
            s->qtail = NULL;
        free(q->data);
        free(q);
    }
    if (s->paused) {
        /* A readable socket is no news while paused: watch it only in the
         * direction a blocked write waits for (libssh2 reads the window
         * adjustments inside the write). The next PING comes within a
         * second. */
        if (s->qhead)
            wait_io(s, 0);
        else
            uv_poll_stop(&s->poll);
        return;
    }
    if (libssh2_channel_eof(s->channel)) {
        s->st = ST_CLOSE;
        return;
    }
    /* Bounded: data on a stream other than stdout and stderr is never
     * read, and must not spin the loop. */
    if (data_held(s) && ++passes < 8)
        goto again;
    /* A blocked write says which way it waits: for the socket to take
     * more, or, with the agent's window full, for its adjustment to be
     * read. Watching a writable socket then would spin. */
    wait_io(s, UV_READABLE);
}

static void step(struct hr_ssh *s)
{
    int rc;
    for (;;) {
        switch (s->st) {
        case ST_CONNECT:
            connected(s);
            if (s->st == ST_CONNECT)
                return;
            continue;
        case ST_HANDSHAKE:
            rc = libssh2_session_handshake(s->session, s->fd);
            if (again(rc))
                goto wait;
            if (rc) {
                fail(s, "SSH handshake failed: %s", ssh_error(s));
                return;
            }
            char msg[1024];
            int outcome;
            s->a->stage = "checking the host key";
            if (hr_known_hosts_verify(s->session, &s->t, &outcome, msg,
                                      sizeof(msg)) != 0) {
                fail(s, "%s", msg);
                return;
            }
            if (outcome != HR_KH_MATCH && msg[0])
                hvd_log_warn("host %s: %s", s->a->name, msg);
            s->st = ST_AUTH_LIST;
            s->a->stage = "authenticating";
            continue;
        case ST_AUTH_LIST:
        case ST_AUTH_AGENT:
        case ST_AUTH_FILE:
            if (step_auth(s))
                goto wait;
            continue;
        case ST_CHANNEL:
        case ST_EXEC:
            if (step_channel(s))
                goto wait;
            continue;
        case ST_RUN:
            step_run(s);
            if (s->st == ST_CLOSE)
                continue;
            return;
        case ST_CLOSE:
            rc = libssh2_channel_close(s->channel);
            if (again(rc))
                goto wait;
            ended(s);
            return;
        default:
            return;
        }
    }
wait:
    if (s->st != ST_DONE)
        wait_io(s, 0);
}

static void resolve(struct hr_ssh *s)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
    char port[16];

    s->st = ST_RESOLVE;
    if (s->a->retrying == NULL)
        s->a->stage = "resolving the name";
    s->gai.data = s;
    snprintf(port, sizeof(port), "%d", s->t.port);
    int rc =
        uv_getaddrinfo(s->loop, &s->gai, on_resolved, s->t.host, port, &hints);
    if (rc != 0)
        fail(s, "cannot resolve the name: %s", uv_strerror(rc));
}

static int ssh_start(struct hr_agent *a)
{
    struct hr_ssh *s = a->ssh;

    s->loop = a->loop;
    uv_timer_init(s->loop, &s->defer);
    uv_timer_init(s->loop, &s->retry);
    s->defer.data = s->retry.data = s;
    s->defer_open = 1;
    s->t0 = uv_now(s->loop);
    s->backoff_ms = RETRY_FIRST_MS;
    a->running = 1;
    if (s->cfg_err[0])
        fail(s, "%s", s->cfg_err);
    else
        resolve(s);
    return 0;
}

/* Steps on the loop's next turn (a writable socket is ready at once),
 * never inside the caller: a step reads, and the agent's frames, handed to
 * the owner there, could end what the caller still holds (a rendezvous
 * connection whose bytes it was sending, say). */
static void step_soon(struct hr_ssh *s)
{
    wait_io(s, UV_READABLE | UV_WRITABLE);
}

static void ssh_send(struct hr_agent *a, uint8_t *frame, size_t len)
{
    struct hr_ssh *s = a->ssh;
    struct outq *q = malloc(sizeof(*q));
    if (q == NULL || s->st != ST_RUN) {
        free(q);
        free(frame);
        return;
    }
    *q = (struct outq){frame, len, 0, NULL};
    if (s->qtail)
        s->qtail->next = q;
    else
        s->qhead = q;
    s->qtail = q;
    step_soon(s);
}

static void ssh_pause(struct hr_agent *a, int pause)
{
    struct hr_ssh *s = a->ssh;
    if (s->paused == pause)
        return;
    s->paused = pause;
    /* Frames may wait inside libssh2 with the socket quiet: read them
     * on the next turn rather than on the next packet. */
    if (!pause && s->st == ST_RUN)
        step_soon(s);
}

static void ssh_kill(struct hr_agent *a, int sig)
{
    struct hr_ssh *s = a->ssh;
    (void)sig; /* the agent hears its stdin close, whatever sig is */
    if (s->st == ST_DONE || s->st == ST_IDLE)
        return;
    /* Closing the connection makes sshd close the agent's stdin, and the
     * agent stops its ranks. */
    teardown(s);
    finish(s);
}

static void ssh_release(struct hr_agent *a)
{
    struct hr_ssh *s = a->ssh;
    teardown(s);
    if (s->defer_open) {
        uv_close((uv_handle_t *)&s->defer, nothing);
        uv_close((uv_handle_t *)&s->retry, nothing);
        s->defer_open = 0;
    }
}

const struct hr_link_ops hr_link_ssh = {
    .start = ssh_start,
    .send = ssh_send,
    .pause = ssh_pause,
    .kill = ssh_kill,
    .release = ssh_release,
};
