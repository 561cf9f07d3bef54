/* The link to an agent started here over pipes (hvd-agent, or srun). */
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/lib/log.h"
#include "launcher/link/link.h"
#include "launcher/link/rsh.h"

struct send_req {
    uv_write_t req;
    uint8_t *frame;
};

static void on_sent(uv_write_t *req, int status)
{
    struct send_req *sr = (struct send_req *)req;
    (void)status; /* a dead agent is noticed by its exit */
    free(sr->frame);
    free(sr);
}

void hr_link_write(uv_stream_t *to, uint8_t *frame, size_t len)
{
    struct send_req *sr = malloc(sizeof(*sr));
    if (sr == NULL) {
        free(frame);
        return;
    }
    sr->frame = frame;
    uv_buf_t b = uv_buf_init((char *)frame, (unsigned)len);
    if (uv_write(&sr->req, to, &b, 1, on_sent) != 0) {
        free(frame);
        free(sr);
    }
}

static void pipes_send(struct hr_agent *a, uint8_t *frame, size_t len)
{
    if (!a->running)
        free(frame);
    else if (a->rsh)
        hr_rsh_send(a, frame, len);
    else
        hr_link_write((uv_stream_t *)&a->to, frame, len);
}

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    static char chunk[65536];
    (void)h, (void)hint;
    *buf = uv_buf_init(chunk, sizeof(chunk));
}

static void pipes_kill(struct hr_agent *a, int sig);

void hr_link_check_end(struct hr_agent *a)
{
    if (!a->running && !a->reading && !hr_rsh_reading(a->rsh))
        a->cb->ended(a);
}

static void on_data(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct hr_agent *a = s->data;
    ssize_t skip = 0;
    if (n < 0) {
        uv_read_stop(s);
        a->reading = 0;
        hr_link_check_end(a);
        return;
    }
    if (a->rsh && (skip = hr_rsh_preamble(a, buf->base, (size_t)n)) < 0) {
        pipes_kill(a, SIGKILL);
        return;
    }
    if (n > skip)
        a->cb->bytes(a, buf->base + skip, (size_t)(n - skip));
}

/* The agent's pipe fills while we do not read it, and the agent stops
 * reading its ranks in turn. */
static void pipes_pause(struct hr_agent *a, int pause)
{
    hr_rsh_pause(a->rsh, pause);
    if (!a->reading || !a->handles_open)
        return;
    if (pause)
        uv_read_stop((uv_stream_t *)&a->from);
    else
        uv_read_start((uv_stream_t *)&a->from, alloc_cb, on_data);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
    struct hr_agent *a = p->data;
    /* The command ended: an agent still running there stops, unless its
     * connection is its link (it ends when the agent does). */
    if (!hr_rsh_duplex(a->rsh))
        hr_rsh_hangup(a->rsh);
    if (a->rsh && !a->hello && a->failure[0] == '\0')
        snprintf(a->failure, sizeof(a->failure),
                 "the rsh agent '%.200s' exited with %s %d before hvd-agent "
                 "there connected back (its messages, if any, are above)",
                 a->argv.v[0], sig ? "signal" : "status",
                 sig ? sig : (int)status);
    a->running = 0;
    a->status = status;
    a->term_signal = sig;
    hr_link_check_end(a);
}

int hr_link_sibling_path(const char *name, char *out, size_t len)
{
    size_t n = len;
    if (uv_exepath(out, &n) != 0)
        return -1;
    char *slash = strrchr(out, '/');
    size_t nlen = strlen(name);
    if (slash == NULL || (size_t)(slash - out) + 1 + nlen + 1 > len)
        return -1;
    memcpy(slash + 1, name, nlen + 1);
    return 0;
}

/* Starts a->argv (argv[0] a path), or without one the hvd-agent next to
 * horovodrun, with its stdin and stdout as the link. */
static int pipes_start(struct hr_agent *a)
{
    uv_loop_t *loop = a->loop;
    char *const *argv = a->argv.n ? a->argv.v : NULL;
    char path[PATH_MAX];
    char *agent_args[] = {"hvd-agent", NULL};
    char **args = argv ? (char **)argv : agent_args;
    uv_stdio_container_t stdio[3];

    if (argv != NULL)
        snprintf(path, sizeof(path), "%s", argv[0]);
    else if (hr_link_sibling_path("hvd-agent", path, sizeof(path)) != 0) {
        snprintf(a->failure, sizeof(a->failure),
                 "cannot find hvd-agent next to horovodrun");
        return -1;
    }
    uv_pipe_init(loop, &a->to, 0);
    uv_pipe_init(loop, &a->from, 0);
    a->to.data = a->from.data = a->proc.data = a;
    /* An rsh agent's command gets no input: its agent connects back. */
    stdio[0].flags = a->rsh ? UV_IGNORE : UV_CREATE_PIPE | UV_READABLE_PIPE;
    stdio[0].data.stream = (uv_stream_t *)&a->to;
    stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[1].data.stream = (uv_stream_t *)&a->from;
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = 2;
    /* Detached: a Ctrl-C at the terminal reaches horovodrun only, which
     * decides what the ranks get. */
    uv_process_options_t po = {
        .exit_cb = on_exit_cb,
        .file = path,
        .args = args,
        .flags = UV_PROCESS_DETACHED,
        .stdio_count = 3,
        .stdio = stdio,
    };
    int err = uv_spawn(loop, &a->proc, &po);
    a->handles_open = 1;
    if (err) {
        snprintf(a->failure, sizeof(a->failure), "cannot start %.300s: %s",
                 path, uv_strerror(err));
        return -1;
    }
    a->running = 1;
    a->reading = 1;
    uv_read_start((uv_stream_t *)&a->from, alloc_cb, on_data);
    hvd_log_info("host %s: started hvd-agent%s%s (pid %d) for %u ranks",
                 a->name, argv ? " through " : "", argv ? argv[0] : "",
                 a->proc.pid, a->nranks);
    if (a->rsh)
        a->stage = "waiting for hvd-agent to connect back";
    return 0;
}

static void nothing(uv_handle_t *h)
{
    (void)h;
}

static void pipes_kill(struct hr_agent *a, int sig)
{
    /* The command may outlive its agent (kubectl exec does): the closed
     * connection is what stops the agent. */
    hr_rsh_hangup(a->rsh);
    if (a->running)
        uv_process_kill(&a->proc, sig);
}

static void pipes_release(struct hr_agent *a)
{
    if (!a->handles_open)
        return;
    a->handles_open = 0;
    uv_close((uv_handle_t *)&a->proc, nothing);
    uv_close((uv_handle_t *)&a->to, nothing);
    uv_close((uv_handle_t *)&a->from, nothing);
}

const struct hr_link_ops hr_link_pipes = {
    .start = pipes_start,
    .send = pipes_send,
    .pause = pipes_pause,
    .kill = pipes_kill,
    .release = pipes_release,
};
