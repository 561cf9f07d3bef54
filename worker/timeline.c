/*
 * Chrome trace event files (JSON array format, loadable in Perfetto and
 * chrome://tracing). The file is valid JSON after every event, so a job
 * killed at any moment leaves a file that parses: each event is written
 * with one pwrite over the previous closing bracket, followed by a new
 * one.
 */
#include "worker/timeline.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/hvd_err.h"

int hvd__timeline_open(struct hvd_timeline *tl, const char *path,
                       int mark_cycles)
{
    memset(tl, 0, sizeof(*tl));
    tl->fd = -1;
    if (path == NULL || path[0] == '\0')
        return 0;
    tl->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (tl->fd < 0)
        return HVD_ESYS;
    tl->mark_cycles = mark_cycles;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    tl->t0_us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    static const char empty[] = "[\n]\n";
    if (write(tl->fd, empty, sizeof(empty) - 1) != sizeof(empty) - 1) {
        close(tl->fd);
        tl->fd = -1;
        return HVD_ESYS;
    }
    tl->end = 2;
    return 0;
}

void hvd__timeline_close(struct hvd_timeline *tl)
{
    if (tl == NULL)
        return;
    if (tl->fd >= 0)
        close(tl->fd);
    tl->fd = -1;
    for (size_t i = 0; i < tl->nnames; i++)
        free(tl->names[i]);
    free(tl->names);
    tl->names = NULL;
    tl->nnames = tl->cap = 0;
}

/* Writes one event object (without separator) over the closing bracket. */
static void emit(struct hvd_timeline *tl, const char *obj)
{
    char *buf = malloc(strlen(obj) + 8);
    if (buf == NULL)
        return;
    int n = sprintf(buf, "%s%s\n]\n", tl->events ? "," : "", obj);
    if (pwrite(tl->fd, buf, (size_t)n, tl->end) == n) {
        tl->end += n - 2;
        tl->events++;
    }
    free(buf);
}

/* JSON string contents: quotes, backslashes and controls escaped. */
static void escape(char *out, size_t len, const char *in)
{
    size_t o = 0;
    for (; *in && o + 7 < len; in++) {
        unsigned char ch = (unsigned char)*in;
        if (ch == '"' || ch == '\\') {
            out[o++] = '\\';
            out[o++] = (char)ch;
        } else if (ch < 0x20) {
            o += (size_t)snprintf(out + o, len - o, "\\u%04x", ch);
        } else {
            out[o++] = (char)ch;
        }
    }
    out[o] = '\0';
}

/* The thread id of a tensor; the first time, its name as metadata. */
static size_t tensor_id(struct hvd_timeline *tl, const char *name)
{
    for (size_t i = 0; i < tl->nnames; i++)
        if (strcmp(tl->names[i], name) == 0)
            return i + 1;
    if (tl->nnames == tl->cap) {
        size_t cap = tl->cap ? 2 * tl->cap : 64;
        char **n = realloc(tl->names, cap * sizeof(*n));
        if (n == NULL)
            return 0;
        tl->names = n;
        tl->cap = cap;
    }
    if ((tl->names[tl->nnames] = strdup(name)) == NULL)
        return 0;
    size_t id = ++tl->nnames;
    char esc[600], obj[800];
    escape(esc, sizeof(esc), name);
    snprintf(obj, sizeof(obj),
             "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, "
             "\"tid\": %zu, \"args\": {\"name\": \"%s\"}}",
             id, esc);
    emit(tl, obj);
    return id;
}

void hvd__timeline_phase(struct hvd_timeline *tl, const char *tensor,
                         const char *phase, int64_t start_us, int64_t dur_us,
                         const char *args_json)
{
    char esc[600], obj[1024];
    if (tl->fd < 0)
        return;
    /* A phase begun before a timeline started at run time shows from the
     * timeline's start. */
    if (start_us < tl->t0_us) {
        dur_us -= tl->t0_us - start_us;
        start_us = tl->t0_us;
    }
    size_t id = tensor_id(tl, tensor);
    escape(esc, sizeof(esc), tensor);
    snprintf(obj, sizeof(obj),
             "{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": 0, "
             "\"tid\": %zu, \"ts\": %lld, \"dur\": %lld, \"args\": {%s}}",
             phase, esc, id, (long long)(start_us - tl->t0_us),
             (long long)(dur_us > 0 ? dur_us : 0), args_json ? args_json : "");
    emit(tl, obj);
}

void hvd__timeline_cycle(struct hvd_timeline *tl, int64_t at_us)
{
    char obj[160];
    if (tl->fd < 0 || !tl->mark_cycles)
        return;
    snprintf(obj, sizeof(obj),
             "{\"name\": \"CYCLE_START\", \"ph\": \"i\", \"s\": \"g\", "
             "\"pid\": 0, \"tid\": 0, \"ts\": %lld}",
             (long long)(at_us - tl->t0_us));
    emit(tl, obj);
}
