/* horovodrun --config-file: Horovod's YAML layout, read with libyaml. */
#include "launcher/horovodrun/config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "launcher/lib/errcode.h"

/* How a key's value becomes an option. */
enum key_kind {
    KEY_VALUE, /* the option with the value as its argument */
    KEY_BOOL   /* on: the first option; off: the second */
};

struct key {
    const char *section;
    const char *name;
    int kind;
    const char *on, *off; /* long option names */
};

static const struct key keys[] = {
    {"params", "fusion_threshold_mb", KEY_VALUE, "fusion-threshold-mb", NULL},
    {"params", "cycle_time_ms", KEY_VALUE, "cycle-time-ms", NULL},
    {"params", "cache_capacity", KEY_VALUE, "cache-capacity", NULL},
    {"params", "hierarchical_allreduce", KEY_BOOL, "hierarchical-allreduce",
     "no-hierarchical-allreduce"},
    {"params", "hierarchical_allgather", KEY_BOOL, "hierarchical-allgather",
     "no-hierarchical-allgather"},
    {"params", "torus_allreduce", KEY_BOOL, "torus-allreduce",
     "no-torus-allreduce"},
    {"autotune", "enabled", KEY_BOOL, "autotune", "no-autotune"},
    {"autotune", "log_file", KEY_VALUE, "autotune-log-file", NULL},
    {"autotune", "warmup_samples", KEY_VALUE, "autotune-warmup-samples", NULL},
    {"autotune", "steps_per_sample", KEY_VALUE, "autotune-steps-per-sample",
     NULL},
    {"autotune", "bayes_opt_max_samples", KEY_VALUE,
     "autotune-bayes-opt-max-samples", NULL},
    {"autotune", "gaussian_process_noise", KEY_VALUE,
     "autotune-gaussian-process-noise", NULL},
    {"timeline", "filename", KEY_VALUE, "timeline-filename", NULL},
    {"timeline", "mark_cycles", KEY_BOOL, "timeline-mark-cycles",
     "no-timeline-mark-cycles"},
    {"stall_check", "enabled", KEY_BOOL, "stall-check", "no-stall-check"},
    {"stall_check", "warning_time_seconds", KEY_VALUE,
     "stall-check-warning-time-seconds", NULL},
    {"stall_check", "shutdown_time_seconds", KEY_VALUE,
     "stall-check-shutdown-time-seconds", NULL},
    {"library_options", "mpi_threads_disable", KEY_BOOL, "mpi-threads-disable",
     "no-mpi-threads-disable"},
    {"library_options", "num_nccl_streams", KEY_VALUE, "num-nccl-streams",
     NULL},
    {"library_options", "thread_affinity", KEY_VALUE, "thread-affinity", NULL},
    {"library_options", "gloo_timeout_seconds", KEY_VALUE,
     "gloo-timeout-seconds", NULL},
    {"logging", "level", KEY_VALUE, "log-level", NULL},
    {"logging", "with_timestamp", KEY_BOOL, "log-with-timestamp",
     "log-without-timestamp"},
};

/* What one load works on. */
struct cfg {
    struct hr_opts *o;
    const char *path;
    yaml_document_t doc;
    char *err;
    size_t errlen;
};

/* The text of a scalar node, or NULL for any other node. */
static const char *scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value
                                            : NULL;
}

static int line_of(const yaml_node_t *n)
{
    return (int)n->start_mark.line + 1;
}

/* YAML's null (~, null, an empty value), which sets nothing in Horovod. */
static int is_null(const yaml_node_t *n)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
    if (n->type != YAML_SCALAR_NODE ||
        n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    for (size_t i = 0; i < sizeof(nulls) / sizeof(nulls[0]); i++)
        if (strcmp(scalar(n), nulls[i]) == 0)
            return 1;
    return 0;
}

/* YAML 1.1's booleans, as PyYAML reads them, and 1 and 0. 1 true, 0
 * false, -1 neither. */
static int boolean(const char *s)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0)
            return 1;
        if (strcasecmp(s, no[i]) == 0)
            return 0;
    }
    return -1;
}

static int warn(struct cfg *c, const yaml_node_t *at, const char *section,
                const char *key)
{
    if (hvd_strvec_pushf(&c->o->warnings,
                         "%s:%d: %s%s%s is not a setting Horovod reads; "
                         "ignored",
                         c->path, line_of(at), section ? section : "",
                         section ? "." : "", key) != 0) {
        snprintf(c->err, c->errlen, "out of memory");
        return HVD_ENOMEM;
    }
    return 0;
}

/* Applies one key's value through its option. */
static int apply(struct cfg *c, const struct key *k, const yaml_node_t *v)
{
    const char *text = scalar(v), *opt = k->on, *arg = NULL;
    char why[256];

    if (is_null(v))
        return 0;
    if (text == NULL) {
        snprintf(c->err, c->errlen, "%s:%d: %s.%s: must be a single value",
                 c->path, line_of(v), k->section, k->name);
        return HVD_EPARSE;
    }
    if (k->kind == KEY_BOOL) {
        int b = boolean(text);
        if (b < 0) {
            snprintf(c->err, c->errlen,
                     "%s:%d: %s.%s: must be true or false, got '%s'", c->path,
                     line_of(v), k->section, k->name, text);
            return HVD_EPARSE;
        }
        opt = b ? k->on : k->off;
    } else {
        /* The document goes away; the option keeps what it points to. */
        arg = hr_opts_keep(c->o, text, v->data.scalar.length);
        if (arg == NULL) {
            snprintf(c->err, c->errlen, "out of memory");
            return HVD_ENOMEM;
        }
    }
    if (hr_cli_apply(c->o, opt, arg, why, sizeof(why)) != 0) {
        snprintf(c->err, c->errlen, "%s:%d: %s.%s: %s", c->path, line_of(v),
                 k->section, k->name, why);
        return HVD_EPARSE;
    }
    return 0;
}

/* The key that name is in section, or NULL. */
static const struct key *find_key(const char *section, const char *name)
{
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (strcmp(keys[i].section, section) == 0 &&
            strcmp(keys[i].name, name) == 0)
            return &keys[i];
    return NULL;
}

static int has_section(const char *section)
{
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (strcmp(keys[i].section, section) == 0)
            return 1;
    return 0;
}

/* The value of key in the mapping m, or NULL. */
static yaml_node_t *lookup(struct cfg *c, const yaml_node_t *m, const char *key)
{
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start;
         p < m->data.mapping.pairs.top; p++) {
        const char *k = scalar(yaml_document_get_node(&c->doc, p->key));
        if (k && strcmp(k, key) == 0)
            return yaml_document_get_node(&c->doc, p->value);
    }
    return NULL;
}

static int load_section(struct cfg *c, const char *section,
                        const yaml_node_t *m)
{
    int rc;
    if (is_null(m))
        return 0;
    if (m->type != YAML_MAPPING_NODE) {
        snprintf(c->err, c->errlen,
                 "%s:%d: %s: must be a mapping of settings to values", c->path,
                 line_of(m), section);
        return HVD_EPARSE;
    }
    /*
     * Horovod turns autotuning off and the stall check on for a section
     * that does not say "enabled": for the stall check that is exported
     * (HOROVOD_STALL_CHECK_DISABLE=0).
     */
    if (m->data.mapping.pairs.top > m->data.mapping.pairs.start &&
        lookup(c, m, "enabled") == NULL &&
        (strcmp(section, "autotune") == 0 ||
         strcmp(section, "stall_check") == 0)) {
        const char *opt =
            strcmp(section, "autotune") == 0 ? "no-autotune" : "stall-check";
        if (hr_cli_apply(c->o, opt, NULL, c->err, c->errlen) != 0)
            return HVD_EPARSE;
    }
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start;
         p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = yaml_document_get_node(&c->doc, p->key);
        yaml_node_t *vn = yaml_document_get_node(&c->doc, p->value);
        const char *name = scalar(kn);
        const struct key *k = name ? find_key(section, name) : NULL;
        if (k == NULL)
            rc = warn(c, kn, section, name ? name : "(a key that is no text)");
        else
            rc = apply(c, k, vn);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* controller: gloo or mpi, in any case, as Horovod lowers it. */
static int load_controller(struct cfg *c, const yaml_node_t *v)
{
    const char *text = scalar(v);
    if (is_null(v))
        return 0;
    if (text && strcasecmp(text, "gloo") == 0)
        return hr_cli_apply(c->o, "gloo", NULL, c->err, c->errlen);
    if (text && strcasecmp(text, "mpi") == 0)
        return hr_cli_apply(c->o, "mpi", NULL, c->err, c->errlen);
    snprintf(c->err, c->errlen, "%s:%d: controller: must be gloo or mpi%s%s%s",
             c->path, line_of(v), text ? ", got '" : "", text ? text : "",
             text ? "'" : "");
    return HVD_EPARSE;
}

static int load_root(struct cfg *c, const yaml_node_t *root)
{
    int rc = 0;
    if (root == NULL || is_null(root))
        return 0; /* an empty file sets nothing */
    if (root->type != YAML_MAPPING_NODE) {
        snprintf(c->err, c->errlen,
                 "%s:%d: the top level must map section names (params, "
                 "autotune, ...) to their settings",
                 c->path, line_of(root));
        return HVD_EPARSE;
    }
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start;
         p < root->data.mapping.pairs.top && rc == 0; p++) {
        yaml_node_t *kn = yaml_document_get_node(&c->doc, p->key);
        yaml_node_t *vn = yaml_document_get_node(&c->doc, p->value);
        const char *name = scalar(kn);
        if (name && strcmp(name, "controller") == 0)
            rc = load_controller(c, vn);
        else if (name && has_section(name))
            rc = load_section(c, name, vn);
        else
            rc = warn(c, kn, NULL, name ? name : "(a key that is no text)");
    }
    return rc;
}

int hr_config_load(struct hr_opts *o, const char *path, char *err,
                   size_t errlen)
{
    struct cfg c = {.o = o, .path = path, .err = err, .errlen = errlen};
    yaml_parser_t parser;
    int parser_ok = 0, doc_ok = 0, rc;
    FILE *f = fopen(path, "rb");

    if (f == NULL) {
        snprintf(err, errlen, "cannot read --config-file '%s': %s", path,
                 strerror(errno));
        rc = HVD_EIO;
        goto out;
    }
    if (!(parser_ok = yaml_parser_initialize(&parser))) {
        snprintf(err, errlen, "out of memory");
        rc = HVD_ENOMEM;
        goto out;
    }
    yaml_parser_set_input_file(&parser, f);
    if (!(doc_ok = yaml_parser_load(&parser, &c.doc))) {
        snprintf(err, errlen, "%s:%d: not valid YAML: %s%s%s", path,
                 (int)parser.problem_mark.line + 1,
                 parser.problem ? parser.problem : "unreadable",
                 parser.context ? " " : "",
                 parser.context ? parser.context : "");
        rc = parser.error == YAML_MEMORY_ERROR ? HVD_ENOMEM : HVD_EPARSE;
        goto out;
    }
    rc = load_root(&c, yaml_document_get_root_node(&c.doc));
    if (rc != 0 && rc != HVD_ENOMEM)
        rc = HVD_EPARSE;
out:
    if (doc_ok)
        yaml_document_delete(&c.doc);
    if (parser_ok)
        yaml_parser_delete(&parser);
    if (f)
        fclose(f);
    return rc;
}
