/*
 * A stand-in for an Ascend inference program, used by tests/test_collect_local.py.
 *
 * It does what the profiling part of the ACL runtime does with acl.json
 * (spec/collectors.md §2.2, §2.3), and nothing else:
 *   - reads the acl.json whose path is given with --acl, else ./acl.json (relative to the cwd);
 *   - a missing or unreadable file is ACL_ERROR_INVALID_FILE (100003), bad JSON is
 *     ACL_ERROR_PARSE_FILE (100006);
 *   - every key of the "profiler" object is checked before the switch is looked at: an unknown
 *     key, a value of the wrong JSON type or a bad value is ACL_ERROR_INVALID_PARAM (100000);
 *   - profiling is on only when switch is exactly "on";
 *   - the data goes to "output" (relative to the cwd) when that is an existing writable directory,
 *     else to the directory of the executable;
 *   - CANN flavour (default build): a PROF_<6-digit index>_<17-digit local time>_<8-digit pid><8
 *     letters A-R> directory; start_info when "aclInit" runs, the rest when "aclFinalize" runs;
 *   - SoC flavour (built with -DSOC_FLAVOUR): a JOB<16 letters> directory with data/ and
 *     info.json.0.
 * The files it writes are synthetic and say so ("fake_acl_app": "synthetic"). With a payload
 * directory (--payload DIR or $FAKE_ACL_PAYLOAD), the payload's contents (a real PROF_xxx or JOBxxx
 * collection's children) are copied into the new directory at "aclFinalize" instead, so the test
 * can import and export real data.
 *
 * On an ACL failure it prints "aclInit failed, ret = <code>: <reason>" on stderr and exits 1, as
 * the CANN samples do.
 *
 * Other options: --sleep SECONDS (the "inference"), --crash (SIGSEGV between init and finalize),
 * --exit N (exit status after finalize), --echo-config (print the acl.json text it read, between
 * "----- acl.json -----" lines, on stdout).
 *
 * Built by a test fixture with the system gcc; no binary is committed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define ACL_SUCCESS 0
#define ACL_ERROR_INVALID_PARAM 100000
#define ACL_ERROR_INVALID_FILE 100003
#define ACL_ERROR_PARSE_FILE 100006

#define MAX_ENTRIES 64
#define MAX_KEY 256
#define MAX_VALUE 8192

/* ---------------------------------------------------------------- a small JSON reader */

enum vtype { V_STRING, V_NUMBER, V_OTHER };

struct entry {
    char key[MAX_KEY];
    enum vtype type;
    char value[MAX_VALUE];
};

struct parser {
    const char *s;
    size_t i, n;
    int in_profiler;          /* depth-1 member named "profiler" is being read */
    int have_profiler;
    int profiler_not_object;
    struct entry entries[MAX_ENTRIES];
    int count;
};

static void skip_ws(struct parser *p)
{
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static void put_utf8(char *out, size_t cap, size_t *len, unsigned cp)
{
    char buf[4];
    size_t k = 0;
    if (cp < 0x80) {
        buf[k++] = (char)cp;
    } else if (cp < 0x800) {
        buf[k++] = (char)(0xC0 | (cp >> 6));
        buf[k++] = (char)(0x80 | (cp & 0x3F));
    } else {
        buf[k++] = (char)(0xE0 | (cp >> 12));
        buf[k++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        buf[k++] = (char)(0x80 | (cp & 0x3F));
    }
    for (size_t j = 0; j < k; j++) {
        if (out && *len + 1 < cap)
            out[*len] = buf[j];
        (*len)++;
    }
}

/* A string at p->i; decoded into out (if not NULL). Returns 0, or -1 on a syntax error. */
static int parse_string(struct parser *p, char *out, size_t cap)
{
    size_t len = 0;
    if (p->i >= p->n || p->s[p->i] != '"')
        return -1;
    p->i++;
    while (p->i < p->n) {
        unsigned char c = (unsigned char)p->s[p->i++];
        if (c == '"') {
            if (out)
                out[len < cap ? len : cap - 1] = '\0';
            return 0;
        }
        if (c < 0x20)
            return -1;
        if (c == '\\') {
            if (p->i >= p->n)
                return -1;
            char e = p->s[p->i++];
            unsigned cp;
            switch (e) {
            case '"': cp = '"'; break;
            case '\\': cp = '\\'; break;
            case '/': cp = '/'; break;
            case 'b': cp = '\b'; break;
            case 'f': cp = '\f'; break;
            case 'n': cp = '\n'; break;
            case 'r': cp = '\r'; break;
            case 't': cp = '\t'; break;
            case 'u':
                if (p->i + 4 > p->n)
                    return -1;
                cp = 0;
                for (int k = 0; k < 4; k++) {
                    char h = p->s[p->i++];
                    cp <<= 4;
                    if (h >= '0' && h <= '9') cp |= (unsigned)(h - '0');
                    else if (h >= 'a' && h <= 'f') cp |= (unsigned)(h - 'a' + 10);
                    else if (h >= 'A' && h <= 'F') cp |= (unsigned)(h - 'A' + 10);
                    else return -1;
                }
                break;
            default:
                return -1;
            }
            put_utf8(out, cap, &len, cp);
        } else {
            if (out && len + 1 < cap)
                out[len] = (char)c;
            len++;
        }
    }
    return -1;
}

static int parse_number(struct parser *p, char *out, size_t cap)
{
    size_t start = p->i;
    if (p->i < p->n && p->s[p->i] == '-')
        p->i++;
    if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
        return -1;
    while (p->i < p->n && strchr("0123456789+-.eE", p->s[p->i]))
        p->i++;
    if (out) {
        size_t len = p->i - start < cap - 1 ? p->i - start : cap - 1;
        memcpy(out, p->s + start, len);
        out[len] = '\0';
    }
    return 0;
}

static int parse_value(struct parser *p, int depth, struct entry *into);

static int parse_object(struct parser *p, int depth)
{
    p->i++; /* '{' */
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == '}') {
        p->i++;
        return 0;
    }
    for (;;) {
        char key[MAX_KEY];
        skip_ws(p);
        if (parse_string(p, key, sizeof key) != 0)
            return -1;
        skip_ws(p);
        if (p->i >= p->n || p->s[p->i++] != ':')
            return -1;
        skip_ws(p);
        struct entry *into = NULL;
        int was = p->in_profiler;
        if (depth == 1 && strcmp(key, "profiler") == 0) {
            p->in_profiler = 1;
            p->have_profiler = 1;
        } else if (depth == 2 && p->in_profiler && p->count < MAX_ENTRIES) {
            into = &p->entries[p->count++];
            snprintf(into->key, sizeof into->key, "%s", key);
        }
        if (parse_value(p, depth + 1, into) != 0)
            return -1;
        p->in_profiler = was;
        skip_ws(p);
        if (p->i >= p->n)
            return -1;
        char c = p->s[p->i++];
        if (c == '}')
            return 0;
        if (c != ',')
            return -1;
    }
}

static int parse_array(struct parser *p, int depth)
{
    p->i++; /* '[' */
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == ']') {
        p->i++;
        return 0;
    }
    for (;;) {
        skip_ws(p);
        int was = p->in_profiler;
        p->in_profiler = 0;
        if (parse_value(p, depth + 1, NULL) != 0)
            return -1;
        p->in_profiler = was;
        skip_ws(p);
        if (p->i >= p->n)
            return -1;
        char c = p->s[p->i++];
        if (c == ']')
            return 0;
        if (c != ',')
            return -1;
    }
}

static int parse_value(struct parser *p, int depth, struct entry *into)
{
    skip_ws(p);
    if (p->i >= p->n || depth > 64)
        return -1;
    char c = p->s[p->i];
    if (into)
        into->type = V_OTHER;
    if (depth == 2 && p->in_profiler && c != '{')
        p->profiler_not_object = 1;
    if (c == '{') {
        if (depth == 2 && p->in_profiler)
            return parse_object(p, depth);
        int was = p->in_profiler;
        p->in_profiler = 0;
        int r = parse_object(p, depth);
        p->in_profiler = was;
        return r;
    }
    if (c == '[')
        return parse_array(p, depth);
    if (c == '"') {
        if (into)
            into->type = V_STRING;
        return parse_string(p, into ? into->value : NULL, MAX_VALUE);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        if (into)
            into->type = V_NUMBER;
        return parse_number(p, into ? into->value : NULL, MAX_VALUE);
    }
    static const char *const words[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        size_t len = strlen(words[k]);
        if (p->n - p->i >= len && strncmp(p->s + p->i, words[k], len) == 0) {
            p->i += len;
            return 0;
        }
    }
    return -1;
}

/* ---------------------------------------------------------------- the profiler key table */

enum kind {
    K_SWITCH, K_CHOICE, K_INT, K_SUBSET, K_STORAGE, K_NONEMPTY, K_OPTYPE, K_METRICS, K_CANN_PATH,
    K_SOC_PATH, K_ANY, K_SOC_INTERVAL
};

struct keyrule {
    const char *name;
    enum kind kind;
    const char *choices; /* '|'-separated, for K_CHOICE and K_SUBSET */
    long lo, hi;
};

#ifdef SOC_FLAVOUR
static const struct keyrule RULES[] = {
    {"switch", K_SWITCH, NULL, 0, 0},
    {"output", K_SOC_PATH, NULL, 0, 0},
    {"aacpu", K_CHOICE, "on|off", 0, 0},
    {"aac_metrics", K_ANY, NULL, 0, 0},  /* any other value only means no AA-core data */
    {"acl_api", K_CHOICE, "on|off", 0, 0},
    {"interval", K_SOC_INTERVAL, NULL, 0, 0},
};
#define INIT_CALL "svp_acl_init"
#else
static const struct keyrule RULES[] = {
    {"switch", K_SWITCH, NULL, 0, 0},
    {"output", K_CANN_PATH, NULL, 0, 0},
    {"storage_limit", K_STORAGE, NULL, 200, 4294967295L},
    {"ascendcl", K_CHOICE, "on|off", 0, 0},
    {"runtime_api", K_CHOICE, "on|off", 0, 0},
    {"task_time", K_CHOICE, "on|off|l0|l1|l2|l3", 0, 0},
    {"aicpu", K_CHOICE, "on|off", 0, 0},
    {"aic_metrics", K_METRICS, NULL, 0, 0},
    {"l2", K_CHOICE, "on|off", 0, 0},
    {"hccl", K_CHOICE, "on|off", 0, 0},
    {"msproftx", K_CHOICE, "on|off", 0, 0},
    {"ge_api", K_CHOICE, "l0|l1|off", 0, 0},
    {"task_memory", K_CHOICE, "on|off", 0, 0},
    {"task_tsfw", K_CHOICE, "on|off", 0, 0},
    {"instr_profiling", K_CHOICE, "on|off", 0, 0},
    {"instr_profiling_freq", K_INT, NULL, 300, 30000},
    {"sys_hardware_mem_freq", K_INT, NULL, 1, 100},
    {"llc_profiling", K_CHOICE, "read|write", 0, 0},
    {"sys_io_sampling_freq", K_INT, NULL, 1, 100},
    {"dvpp_freq", K_INT, NULL, 1, 100},
    {"sys_lp_freq", K_INT, NULL, 1, 100},
    {"sys_interconnection_freq", K_INT, NULL, 1, 50},
    {"sys_cpu_freq", K_INT, NULL, 1, 50},
    {"host_sys_usage_freq", K_INT, NULL, 1, 50},
    {"host_sys", K_SUBSET, "cpu|mem|disk|network|osrt|numa", 0, 0},
    {"host_sys_usage", K_SUBSET, "cpu|mem", 0, 0},
    {"sys_mem_serviceflow", K_NONEMPTY, NULL, 0, 0},
    {"optype", K_OPTYPE, NULL, 0, 0},
};
#define INIT_CALL "aclInit"
#endif

static int in_choices(const char *choices, const char *v, size_t len)
{
    const char *c = choices;
    while (*c) {
        const char *bar = strchr(c, '|');
        size_t clen = bar ? (size_t)(bar - c) : strlen(c);
        if (clen == len && strncmp(c, v, len) == 0)
            return 1;
        if (!bar)
            break;
        c = bar + 1;
    }
    return 0;
}

static int all_digits(const char *v)
{
    if (!*v)
        return 0;
    for (; *v; v++)
        if (*v < '0' || *v > '9')
            return 0;
    return 1;
}

static int int_in(const char *v, long lo, long hi)
{
    if (!all_digits(v) || strlen(v) > 12)
        return 0;
    long long x = atoll(v);
    return x >= lo && x <= hi;
}

static int subset_ok(const char *choices, const char *v)
{
    char seen[16][32];
    int nseen = 0;
    if (!*v)
        return 0;
    for (;;) {
        const char *comma = strchr(v, ',');
        size_t len = comma ? (size_t)(comma - v) : strlen(v);
        if (!in_choices(choices, v, len) || len >= 32 || nseen >= 16)
            return 0;
        for (int k = 0; k < nseen; k++)
            if (strlen(seen[k]) == len && strncmp(seen[k], v, len) == 0)
                return 0;
        memcpy(seen[nseen], v, len);
        seen[nseen++][len] = '\0';
        if (!comma)
            return 1;
        v = comma + 1;
    }
}

static int metrics_ok(const char *v)
{
    static const char *const names =
        "ArithmeticUtilization|PipeUtilization|Memory|MemoryL0|ResourceConflictRatio|MemoryUB|L2Cache|"
        "PipelineExecuteUtilization|MemoryAccess";
    if (*v == '\0' || in_choices(names, v, strlen(v)))
        return 1; /* "" (ais_bench) is taken as the platform default here */
    if (strncmp(v, "Custom:", 7) != 0)
        return 0;
    const char *e = v + 7;
    int n = 0;
    for (;;) {
        if (strncmp(e, "0x", 2) != 0)
            return 0;
        e += 2;
        if (!strchr("0123456789abcdefABCDEF", *e) || !*e)
            return 0;
        while (*e && strchr("0123456789abcdefABCDEF", *e))
            e++;
        if (++n > 8)
            return 0;
        if (*e == '\0')
            return 1;
        if (*e++ != ',')
            return 0;
    }
}

static int cann_path_ok(const char *v)
{
    static const char bad[] = "\n\f\r\b\t\v\x7f\"'\\%><|&$;`";
    return strpbrk(v, bad) == NULL && strlen(v) <= 4096;
}

static int soc_path_ok(const char *v)
{
    if (!*v)
        return 0;
    const char *c = v;
    while (*c) {
        while (*c == '/')
            c++;
        const char *end = strchr(c, '/');
        size_t len = end ? (size_t)(end - c) : strlen(c);
        if (len == 0)
            break;
        int dots = (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.');
        if (!dots)
            for (size_t k = 0; k < len; k++) {
                char ch = c[k];
                if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_'))
                    return 0;
            }
        c += len;
    }
    return 1;
}

/* 0 when the value is acceptable, else a reason in `why` */
static int check_entry(const struct keyrule *r, const struct entry *e, char *why, size_t cap)
{
    if (r->kind == K_SOC_INTERVAL && e->type == V_NUMBER) {
        if (all_digits(e->value))
            return 0;
        snprintf(why, cap, "%s must be an integer >= 0", e->key);
        return -1;
    }
    if (e->type != V_STRING) {
        snprintf(why, cap, "%s must be a string", e->key);
        return -1;
    }
    const char *v = e->value;
    int ok = 1;
    switch (r->kind) {
    case K_SWITCH: case K_ANY: ok = 1; break;
    case K_CHOICE: ok = in_choices(r->choices, v, strlen(v)); break;
    case K_INT: ok = int_in(v, r->lo, r->hi); break;
    case K_SUBSET: ok = subset_ok(r->choices, v); break;
    case K_STORAGE: {
        size_t len = strlen(v);
        char num[32];
        ok = len > 2 && len < sizeof num && strcmp(v + len - 2, "MB") == 0;
        if (ok) {
            memcpy(num, v, len - 2);
            num[len - 2] = '\0';
            ok = int_in(num, r->lo, r->hi);
        }
        break;
    }
    case K_NONEMPTY: ok = strspn(v, " \t") < strlen(v); break;
    case K_OPTYPE: {
        size_t len = strlen(v);
        ok = len > 0 && len <= 256 && v[0] != ',' && v[len - 1] != ',' && strstr(v, ",,") == NULL;
        break;
    }
    case K_METRICS: ok = metrics_ok(v); break;
    case K_CANN_PATH: ok = cann_path_ok(v); break;
    case K_SOC_PATH: ok = soc_path_ok(v); break;
    case K_SOC_INTERVAL: ok = all_digits(v); break;
    }
    if (!ok)
        snprintf(why, cap, "invalid value for %s", e->key);
    return ok ? 0 : -1;
}

/* ---------------------------------------------------------------- the collection */

static const char *entry_value(const struct parser *p, const char *key)
{
    for (int k = 0; k < p->count; k++)
        if (strcmp(p->entries[k].key, key) == 0 && p->entries[k].type == V_STRING)
            return p->entries[k].value;
    return NULL;
}

static char text[1 << 20];

static int acl_init(const char *path, struct parser *p, char *why, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, cap, "cannot open %s: %s", path, strerror(errno));
        return ACL_ERROR_INVALID_FILE;
    }
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    memset(p, 0, sizeof *p);
    p->s = text;
    p->n = n;
    skip_ws(p);
    if (p->i >= p->n || p->s[p->i] != '{' || parse_object(p, 1) != 0) {
        snprintf(why, cap, "%s is not a JSON object (offset %zu)", path, p->i);
        return ACL_ERROR_PARSE_FILE;
    }
    skip_ws(p);
    if (p->i != p->n) {
        snprintf(why, cap, "%s has trailing data at offset %zu", path, p->i);
        return ACL_ERROR_PARSE_FILE;
    }
    if (p->profiler_not_object) {
        snprintf(why, cap, "the profiler section is not an object");
        return ACL_ERROR_INVALID_PARAM;
    }
    for (int k = 0; k < p->count; k++) {
        const struct keyrule *rule = NULL;
        for (size_t r = 0; r < sizeof RULES / sizeof RULES[0]; r++)
            if (strcmp(RULES[r].name, p->entries[k].key) == 0)
                rule = &RULES[r];
        if (!rule) {
            snprintf(why, cap, "unknown profiler key %s", p->entries[k].key);
            return ACL_ERROR_INVALID_PARAM;
        }
        if (check_entry(rule, &p->entries[k], why, cap) != 0)
            return ACL_ERROR_INVALID_PARAM;
    }
#ifndef SOC_FLAVOUR
    const char *instr = entry_value(p, "instr_profiling");
    if (instr && strcmp(instr, "on") == 0) {
        static const char *const exclusive[] = {"aicpu", "aic_metrics", "l2", "hccl", "task_time", "ascendcl",
                                                "runtime_api"};
        for (size_t k = 0; k < sizeof exclusive / sizeof exclusive[0]; k++) {
            for (int e = 0; e < p->count; e++)
                if (strcmp(p->entries[e].key, exclusive[k]) == 0 &&
                    !(p->entries[e].type == V_STRING && strcmp(p->entries[e].value, "off") == 0)) {
                    snprintf(why, cap, "instr_profiling excludes %s", exclusive[k]);
                    return ACL_ERROR_INVALID_PARAM;
                }
        }
    }
#endif
    return ACL_SUCCESS;
}

static int writable_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) && access(path, W_OK | X_OK) == 0;
}

static void now_stamp(char *out, size_t cap, long long *epoch_us)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    char base[32];
    strftime(base, sizeof base, "%Y%m%d%H%M%S", &tm);
    snprintf(out, cap, "%s%03ld", base, ts.tv_nsec / 1000000);
    if (epoch_us)
        *epoch_us = (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static long long monotonic_raw_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* dir/name into out; -1 when it does not fit */
static int join(char *out, size_t cap, const char *dir, const char *name)
{
    int n = snprintf(out, cap, "%s/%s", dir, name);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

static int write_file(const char *dir, const char *name, const char *text)
{
    char path[PATH_MAX];
    if (join(path, sizeof path, dir, name) != 0)
        return -1;
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f);
}

static int copy_file(const char *src, const char *dst)
{
    int in = open(src, O_RDONLY);
    if (in < 0)
        return -1;
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0) {
        close(in);
        return -1;
    }
    char buf[65536];
    ssize_t got;
    int rc = 0;
    while ((got = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)got) != got) {
            rc = -1;
            break;
        }
    if (got < 0)
        rc = -1;
    close(in);
    if (close(out) != 0)
        rc = -1;
    return rc;
}

/* copy the children of src into dst (which exists) */
static int copy_children(const char *src, const char *dst)
{
    DIR *d = opendir(src);
    if (!d)
        return -1;
    struct dirent *de;
    int rc = 0;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char s[PATH_MAX], t[PATH_MAX];
        struct stat st;
        if (join(s, sizeof s, src, de->d_name) != 0 || join(t, sizeof t, dst, de->d_name) != 0 || lstat(s, &st) != 0) {
            rc = -1;
        } else if (S_ISDIR(st.st_mode)) {
            if (mkdir(t, 0755) != 0 && errno != EEXIST)
                rc = -1;
            else
                rc = copy_children(s, t);
        } else if (S_ISREG(st.st_mode)) {
            rc = copy_file(s, t);
        }
    }
    closedir(d);
    return rc;
}

static void info_text(char *out, size_t cap, const char *devices)
{
    snprintf(out, cap,
             "{\"fake_acl_app\": \"synthetic\", \"jobInfo\": \"NA\", \"pid\": \"%d\", \"devices\": \"%s\", "
             "\"DeviceInfo\": []}\n", (int)getpid(), devices);
}

static void time_info(char *out, size_t cap, int begin)
{
    char stamp[32];
    long long us;
    now_stamp(stamp, sizeof stamp, &us);
    if (begin)
        snprintf(out, cap, "{\"fake_acl_app\": \"synthetic\", \"collectionTimeBegin\": \"%lld\", "
                 "\"clockMonotonicRaw\": \"%lld\"}\n", us, monotonic_raw_ns());
    else
        snprintf(out, cap, "{\"fake_acl_app\": \"synthetic\", \"collectionTimeEnd\": \"%lld\", "
                 "\"clockMonotonicRaw\": \"%lld\"}\n", us, monotonic_raw_ns());
}

static int make_dir(const char *parent, const char *name, char *out, size_t cap)
{
    if (join(out, cap, parent, name) != 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return mkdir(out, 0750);
}

/* "aclInit" with the switch on: the collection directory and its start files */
static int start_collection(const char *root, char *coll, size_t cap)
{
    char name[128], sub[PATH_MAX], text[512];
    unsigned seed = (unsigned)getpid() ^ (unsigned)monotonic_raw_ns();
    srand(seed);
#ifdef SOC_FLAVOUR
    strcpy(name, "JOB");
    for (int k = 0; k < 16; k++)
        name[3 + k] = (char)('A' + rand() % 26);
    name[19] = '\0';
    if (make_dir(root, name, coll, cap) != 0)
        return -1;
    if (make_dir(coll, "data", sub, sizeof sub) != 0)
        return -1;
    time_info(text, sizeof text, 1);
    return write_file(coll, "start_info.0", text);
#else
    char stamp[32], letters[9];
    now_stamp(stamp, sizeof stamp, NULL);
    for (int k = 0; k < 8; k++)
        letters[k] = (char)('A' + rand() % 18);
    letters[8] = '\0';
    snprintf(name, sizeof name, "PROF_000001_%s_%08d%s", stamp, (int)getpid() % 100000000, letters);
    if (make_dir(root, name, coll, cap) != 0)
        return -1;
    time_info(text, sizeof text, 1);
    if (make_dir(coll, "host", sub, sizeof sub) != 0 || write_file(sub, "start_info", text) != 0)
        return -1;
    if (make_dir(coll, "device_0", sub, sizeof sub) != 0 || write_file(sub, "start_info.0", text) != 0)
        return -1;
    return 0;
#endif
}

/* "aclFinalize": the payload, or the synthetic control files */
static int finish_collection(const char *coll, const char *payload)
{
    if (payload && *payload)
        return copy_children(payload, coll);
    char text[512], sub[PATH_MAX], data[PATH_MAX];
#ifdef SOC_FLAVOUR
    (void)sub;
    (void)data;
    info_text(text, sizeof text, "0");
    if (write_file(coll, "info.json.0", text) != 0)
        return -1;
    time_info(text, sizeof text, 0);
    return write_file(coll, "end_info.0", text);
#else
    if (join(sub, sizeof sub, coll, "host") != 0 || join(data, sizeof data, sub, "data") != 0)
        return -1;
    mkdir(data, 0750);
    info_text(text, sizeof text, "64");
    if (write_file(sub, "info.json", text) != 0)
        return -1;
    time_info(text, sizeof text, 0);
    if (write_file(sub, "end_info", text) != 0)
        return -1;
    if (join(sub, sizeof sub, coll, "device_0") != 0 || join(data, sizeof data, sub, "data") != 0)
        return -1;
    mkdir(data, 0750);
    info_text(text, sizeof text, "0");
    if (write_file(sub, "info.json.0", text) != 0)
        return -1;
    time_info(text, sizeof text, 0);
    return write_file(sub, "end_info.0", text);
#endif
}

int main(int argc, char **argv)
{
    const char *acl_path = "acl.json";
    const char *payload = getenv("FAKE_ACL_PAYLOAD");
    double sleep_s = 0;
    int crash = 0, exit_status = 0, echo = 0;
    for (int k = 1; k < argc; k++) {
        if (strcmp(argv[k], "--acl") == 0 && k + 1 < argc)
            acl_path = argv[++k];
        else if (strcmp(argv[k], "--payload") == 0 && k + 1 < argc)
            payload = argv[++k];
        else if (strcmp(argv[k], "--sleep") == 0 && k + 1 < argc)
            sleep_s = atof(argv[++k]);
        else if (strcmp(argv[k], "--exit") == 0 && k + 1 < argc)
            exit_status = atoi(argv[++k]);
        else if (strcmp(argv[k], "--crash") == 0)
            crash = 1;
        else if (strcmp(argv[k], "--echo-config") == 0)
            echo = 1;
        else {
            fprintf(stderr, "usage: %s [--acl PATH] [--payload DIR] [--sleep S] [--exit N] [--crash] [--echo-config]\n", argv[0]);
            return 2;
        }
    }

    static struct parser p;
    char why[512] = "";
    int ret = acl_init(acl_path, &p, why, sizeof why);
    if (ret != ACL_SUCCESS) {
        fprintf(stderr, INIT_CALL " failed, ret = %d: %s\n", ret, why);
        return 1;
    }
    const char *sw = entry_value(&p, "switch");
    int on = sw && strcmp(sw, "on") == 0;
    printf("[fake_acl_app] read %s: profiling %s\n", acl_path, on ? "on" : "off");
    if (echo)
        printf("----- acl.json -----\n%s----- acl.json -----\n", text);

    char coll[PATH_MAX] = "";
    if (on) {
        char exe[PATH_MAX];
        ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (len < 0) {
            fprintf(stderr, INIT_CALL " failed, ret = 500005: cannot find the executable: %s\n", strerror(errno));
            return 1;
        }
        exe[len] = '\0';
        const char *root = dirname(exe);
        const char *out = entry_value(&p, "output");
        if (out && *out) {
            if (writable_dir(out))
                root = out;
            else
                fprintf(stderr, "[fake_acl_app] output %s is missing or not writable; writing into %s\n", out, root);
        }
        if (start_collection(root, coll, sizeof coll) != 0) {
            fprintf(stderr, INIT_CALL " failed, ret = 500005: cannot create the collection in %s: %s\n", root,
                    strerror(errno));
            return 1;
        }
    }

    if (sleep_s > 0) {
        struct timespec ts = {(time_t)sleep_s, (long)((sleep_s - (double)(time_t)sleep_s) * 1e9)};
        nanosleep(&ts, NULL);
    }
    if (crash) {
        fflush(stdout);
        raise(SIGSEGV);
    }

    if (on) {
        if (finish_collection(coll, payload) != 0) {
            fprintf(stderr, "aclFinalize failed, ret = 500005: cannot write %s: %s\n", coll, strerror(errno));
            return 1;
        }
        printf("[fake_acl_app] profiling data in %s\n", coll);
    }
    return exit_status;
}
