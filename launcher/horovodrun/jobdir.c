/* Where detached jobs live: folders of small text files, one per job. */
#include "launcher/horovodrun/jobdir.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/secret.h"
#include "launcher/lib/errcode.h"

static int check_dir(const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: %s", path,
                 errno ? strerror(errno) : "not a folder");
        return HVD_EIO;
    }
    if (st.st_uid != geteuid() || (st.st_mode & 022)) {
        snprintf(err, errlen,
                 "%s: another user owns it or may write to it; remove it or "
                 "set XDG_RUNTIME_DIR to a folder of your own",
                 path);
        return HVD_EIO;
    }
    return 0;
}

int hr_jobdir_root(char *out, size_t len, int create, char *err, size_t errlen)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    const char *home = getenv("HOME");
    int n;
    if (xdg && xdg[0])
        n = snprintf(out, len, "%s/horovodrun", xdg);
    else if (home && home[0])
        n = snprintf(out, len, "%s/.horovodrun", home);
    else {
        snprintf(err, errlen,
                 "neither XDG_RUNTIME_DIR nor HOME is set: "
                 "there is no folder for detached jobs");
        return HVD_EIO;
    }
    if (n < 0 || (size_t)n >= len ||
        (size_t)n + 1 + HR_JOB_ID_LEN + 8 > HR_JOBDIR_SOCK_MAX) {
        snprintf(err, errlen,
                 "the folder for detached jobs under %s is too long for a "
                 "socket's path; set XDG_RUNTIME_DIR to a shorter one",
                 xdg && xdg[0] ? xdg : home);
        return HVD_EIO;
    }
    if (create && mkdir(out, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot make %s: %s", out, strerror(errno));
        return HVD_EIO;
    }
    errno = 0;
    return create || access(out, F_OK) == 0 ? check_dir(out, err, errlen) : 0;
}

int hr_jobdir_path(char *out, size_t len, const char *root, const char *id,
                   const char *name)
{
    int n = snprintf(out, len, "%s/%s%s%s", root, id, name ? "/" : "",
                     name ? name : "");
    return n < 0 || (size_t)n >= len ? HVD_EINVAL : 0;
}

int hr_jobdir_new(const char *root, char id[HR_JOB_ID_LEN + 1], char *err,
                  size_t errlen)
{
    uint8_t rnd[HVD_SECRET_LEN];
    char dir[PATH_MAX];
    for (int tries = 0; tries < 8; tries++) {
        if (hvd_secret_new(rnd) != 0) {
            snprintf(err, errlen, "cannot read random bytes: %s",
                     strerror(errno));
            return HVD_EIO;
        }
        for (int i = 0; i < HR_JOB_ID_LEN / 2; i++)
            snprintf(id + 2 * i, 3, "%02x", rnd[i]);
        if (hr_jobdir_path(dir, sizeof(dir), root, id, NULL) != 0)
            break;
        if (mkdir(dir, 0700) == 0)
            return 0;
        if (errno != EEXIST)
            break;
    }
    snprintf(err, errlen, "cannot make a job folder in %s: %s", root,
             strerror(errno));
    return HVD_EIO;
}

int hr_jobdir_write(const char *root, const char *id, const char *name,
                    int (*fill)(FILE *f, void *arg), void *arg)
{
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    if (hr_jobdir_path(path, sizeof(path), root, id, name) != 0)
        return HVD_EIO;
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return HVD_EIO;
    int ok = fill(f, arg) == 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return HVD_EIO;
    }
    return 0;
}

static int put_text(FILE *f, void *text)
{
    return fputs(text, f) >= 0 ? 0 : -1;
}

/* Writes text to root/id/name, whole or not at all. */
static int write_file(const char *root, const char *id, const char *name,
                      char *text)
{
    return hr_jobdir_write(root, id, name, put_text, text);
}

/* One line of text: newlines become spaces. */
static void one_line(char *s)
{
    for (; *s; s++)
        if (*s == '\n' || *s == '\r')
            *s = ' ';
}

int hr_jobdir_write_info(const char *root, const struct hr_jobinfo *ji)
{
    char text[sizeof(ji->cmd) + sizeof(ji->output) + 128];
    snprintf(text, sizeof(text),
             "pid %ld\nstarted %ld\nranks %d\noutput %s\ncmd %s\n", ji->pid,
             ji->started, ji->ranks, ji->output, ji->cmd);
    return write_file(root, ji->id, "info", text);
}

int hr_jobdir_write_status(const char *root, const char *id, int code,
                           const char *summary)
{
    char text[600];
    snprintf(text, sizeof(text), "code %d\nsummary %s", code, summary);
    one_line(text + 5);
    strcat(text, "\n");
    return write_file(root, id, "status", text);
}

/* Reads "key value" lines of root/id/name, calling fn on each. */
static int read_file(const char *root, const char *id, const char *name,
                     struct hr_jobinfo *ji,
                     void (*fn)(struct hr_jobinfo *ji, const char *key,
                                const char *val))
{
    char path[PATH_MAX], line[PATH_MAX + 16];
    if (hr_jobdir_path(path, sizeof(path), root, id, name) != 0)
        return HVD_EIO;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return HVD_EIO;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *sp = strchr(line, ' ');
        if (sp) {
            *sp = '\0';
            fn(ji, line, sp + 1);
        }
    }
    fclose(f);
    return 0;
}

#define COPY(dst, src) snprintf((dst), sizeof(dst), "%s", (src))

static void info_key(struct hr_jobinfo *ji, const char *key, const char *val)
{
    if (strcmp(key, "pid") == 0)
        ji->pid = strtol(val, NULL, 10);
    else if (strcmp(key, "started") == 0)
        ji->started = strtol(val, NULL, 10);
    else if (strcmp(key, "ranks") == 0)
        ji->ranks = (int)strtol(val, NULL, 10);
    else if (strcmp(key, "output") == 0)
        COPY(ji->output, val);
    else if (strcmp(key, "cmd") == 0)
        COPY(ji->cmd, val);
}

static void status_key(struct hr_jobinfo *ji, const char *key, const char *val)
{
    ji->ended = 1;
    if (strcmp(key, "code") == 0)
        ji->code = (int)strtol(val, NULL, 10);
    else if (strcmp(key, "summary") == 0)
        COPY(ji->summary, val);
}

int hr_jobdir_read(const char *root, const char *id, struct hr_jobinfo *ji)
{
    memset(ji, 0, sizeof(*ji));
    COPY(ji->id, id);
    if (read_file(root, id, "info", ji, info_key) != 0)
        return HVD_EIO;
    read_file(root, id, "status", ji, status_key);
    return 0;
}

static int is_id(const char *s)
{
    if (strlen(s) != HR_JOB_ID_LEN)
        return 0;
    return strspn(s, "0123456789abcdef") == HR_JOB_ID_LEN;
}

int hr_jobdir_find(const char *root, const char *prefix,
                   char id[HR_JOB_ID_LEN + 1], char *err, size_t errlen)
{
    size_t n = strlen(prefix), found = 0;
    DIR *d = n ? opendir(root) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (!is_id(e->d_name) || strncmp(e->d_name, prefix, n) != 0)
            continue;
        if (found++ == 0)
            snprintf(id, HR_JOB_ID_LEN + 1, "%s", e->d_name);
    }
    if (d)
        closedir(d);
    if (found == 1)
        return 0;
    snprintf(err, errlen,
             found ? "job id %s is ambiguous: give more of it (horovodrun ps)"
                   : "no job %s; horovodrun ps lists them",
             prefix);
    return HVD_EINVAL;
}

int hr_jobdir_alive(const struct hr_jobinfo *ji)
{
    char path[64], stat[512];
    if (ji->pid <= 0 || (kill((pid_t)ji->pid, 0) != 0 && errno != EPERM))
        return 0;
    /* A zombie nobody reaped (the controller's parent is gone) is dead. */
    snprintf(path, sizeof(path), "/proc/%ld/stat", ji->pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 1;
    size_t n = fread(stat, 1, sizeof(stat) - 1, f);
    fclose(f);
    stat[n] = '\0';
    const char *paren = strrchr(stat, ')');
    return !(paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X'));
}

void hr_jobdir_remove(const char *root, const char *id)
{
    static const char *names[] = {"info", "status", "kept", "sock",
                                  "horovodrun.log"};
    char path[PATH_MAX];
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (hr_jobdir_path(path, sizeof(path), root, id, names[i]) == 0)
            unlink(path);
    if (hr_jobdir_path(path, sizeof(path), root, id, NULL) == 0)
        rmdir(path);
}

int hr_jobdir_each(const char *root, void (*fn)(void *arg, const char *id),
                   void *arg)
{
    DIR *d = opendir(root);
    struct dirent *e;
    if (d == NULL)
        return errno == ENOENT ? 0 : HVD_EIO;
    while ((e = readdir(d)) != NULL)
        if (is_id(e->d_name))
            fn(arg, e->d_name);
    closedir(d);
    return 0;
}
