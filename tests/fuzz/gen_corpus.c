/* Writes the fuzz targets' seed corpus: encoder output plus edge cases. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "common/auth.h"
#include "common/frame.h"
#include "launcher/lib/proto.h"
#include "launcher/lib/relayproto.h"
#include "common/rdvproto.h"
#include "common/secret.h"
#include "common/wire.h"
#include "launcher/lib/mpiwire.h"

static const uint8_t secret[HVD_SECRET_LEN] = FUZZ_SECRET;
static const uint8_t nonce[HVD_NONCE_LEN] = FUZZ_NONCE;

static const char *root;
static int failed;

/* Writes root/target/name: a prefix of parameter bytes, then the body. */
static void seed(const char *target, const char *name, const void *prefix,
                 size_t plen, const void *body, size_t blen)
{
    char path[1024];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", root, target);
    if (mkdir(path, 0777) != 0 && errno != EEXIST) {
        perror(path);
        failed = 1;
        return;
    }
    snprintf(path, sizeof(path), "%s/%s/%s", root, target, name);
    f = fopen(path, "wb");
    if (f == NULL || fwrite(prefix, 1, plen, f) != plen ||
        (blen > 0 && fwrite(body, 1, blen, f) != blen) || fclose(f) != 0) {
        perror(path);
        failed = 1;
    }
}

/* A seed of one C string after the prefix. */
static void seed_str(const char *target, const char *name, const void *prefix,
                     size_t plen, const char *s)
{
    seed(target, name, prefix, plen, s, strlen(s));
}

/* Finishes w as a frame of type and hands back header + payload. */
static uint8_t *finish(struct hvd_wbuf *w, uint8_t type, size_t *len)
{
    uint8_t *out = NULL;

    if (hvd_wbuf_finish(w, type, &out, len) != 0) {
        fprintf(stderr, "gen_corpus: cannot encode a frame\n");
        exit(1);
    }
    return out;
}

/* A job of two ranks with a base and a per-rank environment. */
static uint8_t *job_frame(size_t *len, int nranks, uint32_t dup)
{
    struct hvd_jobspec js;
    uint8_t *out = NULL;

    hvd_jobspec_init(&js);
    js.cwd = strdup("/home/user/train");
    hvd_strvec_push(&js.argv, "python3");
    hvd_strvec_push(&js.argv, "train.py");
    hvd_strvec_push(&js.env, "PATH=/usr/bin:/bin");
    hvd_strvec_push(&js.env, "HOME=/home/user");
    js.kill_grace_ms = 5000;
    js.gpu_pinning = 1;
    for (int i = 0; i < nranks; i++) {
        struct hvd_jobrank *r =
            hvd_jobspec_add_rank(&js, dup ? dup : (uint32_t)i, (uint32_t)i);
        hvd_strvec_pushf(&r->env, "HOROVOD_RANK=%d", i);
        hvd_strvec_pushf(&r->env, "HOROVOD_LOCAL_RANK=%d", i);
    }
    if (hvd_jobspec_encode(&js, &out, len) != 0) {
        fprintf(stderr, "gen_corpus: cannot encode a job\n");
        exit(1);
    }
    hvd_jobspec_close(&js);
    return out;
}

static void frame_seeds(void)
{
    const uint8_t small[] = {0x00, 0x40, 0x12, 0x34};
    const uint8_t real[] = {0x80, 0x00, 0xbe, 0xef};
    const uint8_t tiny[] = {0x00, 0x10, 0x00, 0x01};
    uint8_t two[2 * HVD_FRAME_HDR + 3];
    uint8_t hdr[HVD_FRAME_HDR];
    size_t len;

    hvd_frame_header(two, 1, 3);
    memcpy(two + HVD_FRAME_HDR, "abc", 3);
    hvd_frame_header(two + HVD_FRAME_HDR + 3, 2, 0);
    seed("frame", "two-frames", small, 4, two, sizeof(two));
    uint8_t *job = job_frame(&len, 2, 0);
    seed("frame", "job-real-limit", real, 4, job, len);
    /* The job cut short: more bytes needed, no frame. */
    seed("frame", "job-partial", real, 4, job, len - 5);
    free(job);
    hvd_frame_header(hdr, 6, 17);
    seed("frame", "over-limit", tiny, 4, hdr, sizeof(hdr));
    hvd_frame_header(hdr, 6, 0xffffffffu);
    seed("frame", "huge-length", real, 4, hdr, sizeof(hdr));
    hvd_frame_header(hdr, 6, 0);
    hdr[0] = 'X';
    seed("frame", "bad-magic", small, 4, hdr, sizeof(hdr));
    hvd_frame_header(hdr, 6, 0);
    hdr[2] = HVD_FRAME_VERSION + 1;
    seed("frame", "bad-version", small, 4, hdr, sizeof(hdr));
}

static void proto_seeds(void)
{
    struct hvd_wbuf w;
    uint8_t type;
    uint8_t *f;
    size_t len;

#define PROTO_SEED(name)                                                       \
    do {                                                                       \
        type = f[3];                                                           \
        seed("proto", name, &type, 1, f + HVD_FRAME_HDR, len - HVD_FRAME_HDR); \
        free(f);                                                               \
    } while (0)

    f = job_frame(&len, 2, 0);
    PROTO_SEED("job");
    f = job_frame(&len, 1, 0);
    PROTO_SEED("job-one-rank");
    f = job_frame(&len, 3, 7);
    PROTO_SEED("job-duplicate-ranks");
    /* An empty argv and a count no payload could hold. */
    hvd_wbuf_init(&w);
    hvd_wbuf_str(&w, "");
    hvd_wbuf_u32(&w, 0);
    hvd_wbuf_u32(&w, 0xffffffffu);
    f = finish(&w, HVD_MSG_JOB, &len);
    PROTO_SEED("job-forged-count");

    hvd_wbuf_init(&w);
    hvd_wbuf_u32(&w, HVD_PROTO_VERSION);
    hvd_wbuf_str(&w, "node-1");
    hvd_wbuf_i32(&w, 8);
    hvd_wbuf_i32(&w, 29500);
    f = finish(&w, HVD_MSG_HELLO, &len);
    PROTO_SEED("hello");
    hvd_wbuf_init(&w);
    hvd_wbuf_raw(&w, "some input\n", 11);
    f = finish(&w, HVD_MSG_STDIN, &len);
    PROTO_SEED("stdin");
    hvd_wbuf_init(&w);
    f = finish(&w, HVD_MSG_STDIN, &len);
    PROTO_SEED("stdin-eof");
    hvd_wbuf_init(&w);
    hvd_wbuf_u32(&w, 15);
    f = finish(&w, HVD_MSG_SIGNAL, &len);
    PROTO_SEED("signal");
    hvd_wbuf_init(&w);
    hvd_wbuf_u8(&w, 1);
    f = finish(&w, HVD_MSG_STOP, &len);
    PROTO_SEED("stop");
    hvd_wbuf_init(&w);
    hvd_wbuf_u32(&w, 30000);
    f = finish(&w, HVD_MSG_PING, &len);
    PROTO_SEED("ping");
    hvd_wbuf_init(&w);
    hvd_wbuf_u32(&w, 3);
    hvd_wbuf_u8(&w, HVD_STREAM_STDERR);
    hvd_wbuf_u8(&w, 1);
    hvd_wbuf_raw(&w, "epoch 1 loss 0.25", 17);
    f = finish(&w, HVD_MSG_LINE, &len);
    PROTO_SEED("line");
    hvd_wbuf_init(&w);
    hvd_wbuf_u32(&w, 1);
    hvd_wbuf_u8(&w, HVD_EXIT_SIGNAL);
    hvd_wbuf_i32(&w, 9);
    f = finish(&w, HVD_MSG_EXIT, &len);
    PROTO_SEED("exit");
    hvd_wbuf_init(&w);
    hvd_wbuf_u8(&w, HVD_NOTE_WARN);
    hvd_wbuf_str(&w, "cannot pin GPU 3");
    f = finish(&w, HVD_MSG_NOTE, &len);
    PROTO_SEED("note");

    const struct hvd_spawn sp = {5,     "node-7", 22, "/root/.ssh/id", "", 1,
                                 30000, "",       ""},
                           sp_rsh = {6,     "node-8", 0,
                                     "",    "",       0,
                                     30000, "",       "ssh -o BatchMode=yes"};
    const struct hvd_gone gone = {5, -1, 9, "lost with host node-1"};
    if (hvd_spawn_encode(&sp, &f, &len) != 0)
        exit(1);
    PROTO_SEED("spawn");
    if (hvd_spawn_encode(&sp_rsh, &f, &len) != 0)
        exit(1);
    PROTO_SEED("spawn_rsh");
    if (hvd_gone_encode(&gone, &f, &len) != 0)
        exit(1);
    PROTO_SEED("gone");
    uint8_t ping[HVD_FRAME_HDR + 4] = {0};
    hvd_frame_header(ping, HVD_MSG_PING, 4);
    if (hvd_relay_wrap(HVD_MSG_TO, 5, ping, sizeof(ping), &f, &len) != 0)
        exit(1);
    PROTO_SEED("to");
#undef PROTO_SEED
}

static void rdv_seeds(void)
{
    struct hvd_rdv_register reg = {.rank = 1,
                                   .size = 4,
                                   .host = "node-2",
                                   .addr = "10.0.0.2",
                                   .port = 40123};
    struct hvd_rdv_peer peers[] = {
        {0, "node-1", "10.0.0.1", 40001},
        {2, "node-2", "10.0.0.2", 40002},
    };
    /* Two hosts of two ranks, then one more rank of the first. */
    struct hvd_rdv_run runs[] = {{2, 2, -1}, {1, 1, 0}};
    struct hvd_rdv_peers pt = {5, 2, runs, 2, peers};
    uint8_t *f;
    size_t len;
    /* Byte 0: 0 register, 1 peers, 2 note, 4 assign, 5 hosts; 0x80 asks
     * for a seal. */
    const uint8_t raw_reg = 0, raw_peers = 1, note = 2, hosts = 5;
    const uint8_t seal_reg = 0x80, seal_peers = 0x81, seal_assign = 0x84;
    const struct hvd_rdv_assign as = {2, 4, 0, 2, 1, 2};

    memset(reg.nonce, 0xa5, sizeof(reg.nonce));
    if (hvd_rdv_register_encode(&reg, secret, sizeof(secret), nonce, &f,
                                &len) != 0)
        exit(1);
    seed("rdvproto", "register", &raw_reg, 1, f + HVD_FRAME_HDR,
         len - HVD_FRAME_HDR);
    seed("rdvproto", "register-body", &seal_reg, 1, f + HVD_FRAME_HDR,
         len - HVD_FRAME_HDR - HVD_MAC_LEN);
    /* A body cut inside the nonce. */
    seed("rdvproto", "register-short", &seal_reg, 1, f + HVD_FRAME_HDR, 20);
    free(f);
    reg.port = 0;
    if (hvd_rdv_register_encode(&reg, secret, sizeof(secret), nonce, &f,
                                &len) != 0)
        exit(1);
    seed("rdvproto", "register-port-0", &seal_reg, 1, f + HVD_FRAME_HDR,
         len - HVD_FRAME_HDR - HVD_MAC_LEN);
    free(f);

    if (hvd_rdv_peers_encode(&pt, secret, sizeof(secret), nonce, &f, &len) != 0)
        exit(1);
    seed("rdvproto", "peers", &raw_peers, 1, f + HVD_FRAME_HDR,
         len - HVD_FRAME_HDR);
    seed("rdvproto", "peers-body", &seal_peers, 1, f + HVD_FRAME_HDR,
         len - HVD_FRAME_HDR - HVD_MAC_LEN);
    /* A size beyond the runs, and a run count no body could hold. */
    f[HVD_FRAME_HDR] = 0xff;
    seed("rdvproto", "peers-forged-size", &seal_peers, 1, f + HVD_FRAME_HDR,
         len - HVD_FRAME_HDR - HVD_MAC_LEN);
    f[HVD_FRAME_HDR] = 0;
    f[HVD_FRAME_HDR + 4] = 0xff;
    seed("rdvproto", "peers-forged-count", &seal_peers, 1, f + HVD_FRAME_HDR,
         len - HVD_FRAME_HDR - HVD_MAC_LEN);
    free(f);

    if (hvd_rdv_note_encode(HVD_RDV_ABORT, 3, "rank 3 exited with code 1", &f,
                            &len) != 0)
        exit(1);
    seed("rdvproto", "note", &note, 1, f + HVD_FRAME_HDR, len - HVD_FRAME_HDR);
    free(f);

    if (hvd_rdv_assign_encode(&as, secret, sizeof(secret), nonce, &f, &len) !=
        0)
        exit(1);
    seed("rdvproto", "assign-body", &seal_assign, 1, f + HVD_FRAME_HDR,
         len - HVD_FRAME_HDR - HVD_MAC_LEN);
    free(f);
    if (hvd_rdv_hosts_encode(1764900000, 3, &f, &len) != 0)
        exit(1);
    seed("rdvproto", "hosts", &hosts, 1, f + HVD_FRAME_HDR,
         len - HVD_FRAME_HDR);
    free(f);
}

static void hostspec_seeds(void)
{
    /* Byte 0: 0 spec, 1 hostfile, 2 spec NUL hostfile, 3 hostfile NUL
     * spec; byte 1: message buffer size, 0 for a roomy one. */
    const uint8_t spec[] = {0, 0}, file[] = {1, 0}, both[] = {2, 0};
    const uint8_t rboth[] = {3, 0}, tight[] = {0, 9};
    const char mixed[] = "node-1 slots=2\n[fe80::1] slots=4\0node-1:2";

    seed_str("hostspec", "spec-one", spec, 2, "localhost:4");
    seed_str("hostspec", "spec-many", spec, 2,
             "a:2,b,user@c:3,[fe80::1]:2,user@[::1]:1,10.0.0.1:65536");
    seed_str("hostspec", "spec-ipv6-bare", spec, 2, "fe80::1");
    seed_str("hostspec", "spec-duplicate", spec, 2, "a:1,b:2,a:3");
    seed_str("hostspec", "spec-zero-slots", spec, 2, "a:0");
    seed_str("hostspec", "spec-huge-slots", spec, 2, "a:99999999999999999999");
    seed_str("hostspec", "spec-bad-brackets", spec, 2, "[a]b:1,@x,y@,[]:2");
    seed_str("hostspec", "spec-tight-message", tight, 2, "a-long-host-name:0");
    seed_str("hostspec", "hostfile", file, 2,
             "# cluster\nnode-1 slots=4\r\n  node-2   slots=2 # gpu\n\n"
             "user@node-3\n[fe80::1] slots=8\nfe80::2 slots=1");
    seed_str("hostspec", "hostfile-bad", file, 2,
             "node-1 slots=4\nnode-2 slots=x\nnode:1\n");
    seed_str("hostspec", "hostfile-duplicate", file, 2,
             "node-1\nnode-2 slots=2\nnode-1 slots=3\n");
    seed_str("hostspec", "hostfile-empty", file, 2, "# nothing\n\n");
    seed("hostspec", "spec-then-hostfile", both, 2, mixed, sizeof(mixed) - 1);
    seed("hostspec", "hostfile-then-spec", rboth, 2, mixed, sizeof(mixed) - 1);
}

static void linesplit_seeds(void)
{
    /* Bytes 0-1: line limit (mod 1031; 0 is the default), 2-3: chunking. */
    const uint8_t deflt[] = {0, 0, 0x55, 0xaa}, eight[] = {0, 8, 1, 2};

    seed_str("linesplit", "lines", deflt, 4,
             "epoch 1\nepoch 2\r\n\rprogress 10%\rprogress 20%\r\ndone");
    seed_str("linesplit", "long-lines", eight, 4,
             "0123456789abcdef\n01234567\n012345678\r\n\r\n\n\r\r");
}

/* hvd-mpi-rank's records as mpirun --tag-output carries them. */
static void mpiwire_seeds(void)
{
    /* Bytes 0-1: chunking. */
    const uint8_t chunks[] = {0x5a, 0xa5};
    struct hr_mpibuf b = {0};
    char *out;
    size_t len = 0;

    if (hr_mpiwire_hello(&b, 1, "node[1]") != 0 ||
        hr_mpiwire_line(&b, HVD_STREAM_STDOUT, 1, "epoch 1 100%", 12) != 0 ||
        hr_mpiwire_line(&b, HVD_STREAM_STDERR, 2, "\r[bar]\r", 7) != 0 ||
        hr_mpiwire_exit(&b, HVD_EXIT_SIGNAL, 9) != 0 ||
        (out = malloc(4 * b.len + 64)) == NULL) {
        fprintf(stderr, "gen_corpus: out of memory\n");
        exit(1);
    }
    /* Each line of the records behind its tag, then a record cut in two
     * under two tags with another rank's line between them. */
    for (size_t i = 0, start = 0; i < b.len; i++)
        if (b.p[i] == '\n') {
            len += (size_t)sprintf(out + len, "[7,3]<stdout>:%.*s\n",
                                   (int)(i - start), b.p + start);
            start = i + 1;
        }
    len += (size_t)sprintf(out + len, "[7,0]<stdout>:o1hal[7,2]<stdout>:"
                                      "x0 0\n[7,0]<stdout>:f\n");
    seed("mpiwire", "records", chunks, 2, out, len);
    seed_str("mpiwire", "mpirun-lines", chunks, 2,
             "--------\nmpirun noticed that process rank 1 exited\n"
             "[7,1]<stderr>:Traceback\n[bogus] [7,x]<stdout>:\n[7,1]<std");
    free(out);
    hr_mpibuf_close(&b);
}

/* --mpi-args values (mode 0) and word lists (mode 1). */
static void shellsplit_seeds(void)
{
    const uint8_t split[] = {0}, join[] = {1};
    static const char words[] = "-x\0A B\0it's\0\0\"q\"\0back\\slash";

    seed_str("shellsplit", "mpi-args", split, 1,
             "--mca btl_tcp_if_include lo -x 'A B' \"C \\\"D\\\" $E\" "
             "F\\ G '' \\\nH");
    seed_str("shellsplit", "unclosed", split, 1, "-x 'A");
    seed_str("shellsplit", "trailing-backslash", split, 1, "-x A\\");
    seed("shellsplit", "words", join, 1, words, sizeof(words) - 1);
}

/* ~/.ssh/config texts, looked up for one of the harness's host names. */
static void sshconfig_seeds(void)
{
    /* Byte 0: low two bits the host name (0 "a", 1 "node-1.cluster.local",
     * 2 "[::1]", 3 "10.0.0.1"), the other six the message buffer size, 0
     * for a roomy one. */
    const uint8_t a = 0, node = 1, v6 = 2, ip = 3, tight = 9 << 2;
    char long_line[1200];

    seed_str("sshconfig", "host-blocks", &node, 1,
             "# cluster\nHost *.cluster.local !bastion.cluster.local\n"
             "    HostName %h\n    User train\n    Port 2222\n"
             "    IdentityFile ~/.ssh/id_%r@%h\n"
             "    IdentityFile \"/keys/%u key\"\n"
             "Host *\n    StrictHostKeyChecking accept-new\n"
             "    UserKnownHostsFile ~/.ssh/known_hosts_%n /dev/null\n"
             "    ConnectTimeout 1m30s\n");
    seed_str("sshconfig", "negation", &a, 1,
             "Host * !a\n  User nobody\nHost a b,c\n  HostName=real-%h.lan\n"
             "  Port = 22\n  IdentityFile=%d/.ssh/id_%p_%%\n");
    seed_str("sshconfig", "match-host", &ip, 1,
             "Match host 10.0.0.*,!10.0.0.2\n  User root\n"
             "Match exec \"true\" host *\n  Port 1\n"
             "Match !host 10.0.0.1\n  Port 2\nMatch all\n"
             "  StrictHostKeyChecking no\n  ConnectTimeout 10\n");
    seed_str("sshconfig", "quoted", &v6, 1,
             "Host \"[::1]\" '*.lan'\n\tHostName \"%h\"\n"
             "\tIdentityFile \"~/my keys/id\" # comment\n"
             "\tUser 'us er'\n\tStrictHostKeyChecking=\"yes\"\r\n");
    seed_str("sshconfig", "include", &a, 1,
             "Include config.d/* ~/.ssh/other\nHost a\n  ConnectTimeout 5\n"
             "  Include nested\n");
    seed_str("sshconfig", "bad-port", &a, 1, "Host a\n  Port 65536\n");
    seed_str("sshconfig", "bad-port-tight", &tight, 1, "Host a\n  Port x22\n");
    seed_str("sshconfig", "bad-strict", &node, 1,
             "Host *\n  StrictHostKeyChecking maybe\n");
    seed_str("sshconfig", "bad-token", &a, 1,
             "Host *\n  IdentityFile /k/%z\n  HostName %d.lan\n");
    seed_str("sshconfig", "bad-timeout", &a, 1, "ConnectTimeout 1x\n");
    seed_str("sshconfig", "unclosed-quote", &a, 1, "User \"root\n");
    seed_str("sshconfig", "many-identities", &ip, 1,
             "Host *\n IdentityFile k1\n IdentityFile k2\n IdentityFile k3\n"
             " IdentityFile k4\n IdentityFile k5\n IdentityFile k6\n"
             " IdentityFile k7\n IdentityFile k8\n IdentityFile k9\n"
             " IdentityFile k1\n");
    seed_str("sshconfig", "hostname-too-long", &node, 1,
             "HostName %h%h%h%h%h%h%h%h%h%h%h%h%h%h%h%h\n");
    snprintf(long_line, sizeof(long_line), "Host a\n  User %01150d\n", 7);
    seed_str("sshconfig", "long-line", &a, 1, long_line);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_corpus DIR\n");
        return 2;
    }
    root = argv[1];
    frame_seeds();
    proto_seeds();
    rdv_seeds();
    hostspec_seeds();
    linesplit_seeds();
    mpiwire_seeds();
    shellsplit_seeds();
    sshconfig_seeds();
    return failed;
}
