/*
 * A stand-in for an inference program `main` on a HiSilicon SoC board, used by tests/test_board.py.
 *
 * What it does, the way a real SoC sample does it (spec/collectors.md §2.3):
 *   1. reads the acl.json at ACL_JSON_PATH (relative to the working directory, like the samples'
 *      hard-coded paths; default "acl.json") and checks its "profiler" keys, as svp_acl_init does:
 *      a missing file, bad JSON or an unknown key fails the run;
 *   2. runs the "inference": the file `mode` next to the executable may say `fail` (print an error
 *      and exit 1) or `hang` (never return);
 *   3. with "switch" "on", writes one JOB collection in the SoC layout into "output" (or, when that
 *      is not a writable directory, next to the executable): JOBBOARD<n>/ (n the first free number)
 *      holding a copy of the `payload/` folder shipped next to the executable (data/ and
 *      info.json.0), without AclModule.* files when "acl_api" is "off" and without
 *      DATA_PREPROCESS.* files when "aacpu" is "off", plus board_acl.json, a copy of the acl.json
 *      it read (so the tests can check what the collector wrote).
 *
 * Build: gcc -std=c99 -Wall -Wextra -Werror -O1 -o main main.c   (the test fixture does this)
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#ifndef ACL_JSON_PATH
#define ACL_JSON_PATH "acl.json"
#endif

#define MAX_TEXT (1 << 16)
#define MAX_VALUE 1024

static const char *KEYS[] = {"switch", "output", "aacpu", "aac_metrics", "acl_api", "interval"};
#define N_KEYS (sizeof KEYS / sizeof KEYS[0])

struct config {
    char value[N_KEYS][MAX_VALUE];
    int present[N_KEYS];
};

static int fail(const char *what, const char *detail, int code)
{
    fprintf(stderr, "main: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    return code;
}

static long read_file(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    int bad = ferror(f) || !feof(f);
    fclose(f);
    if (bad)
        return -1;
    buf[n] = '\0';
    return (long)n;
}

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

/* Reads a JSON string at p (which points at the opening quote) into out; returns the position
 * after the closing quote, or NULL. Only the escapes \" \\ \/ are understood. */
static const char *read_string(const char *p, char *out, size_t cap)
{
    size_t n = 0;
    if (*p != '"')
        return NULL;
    for (p++; *p && *p != '"'; p++) {
        char c = *p;
        if (c == '\\') {
            p++;
            if (*p != '"' && *p != '\\' && *p != '/')
                return NULL;
            c = *p;
        }
        if (n + 1 >= cap)
            return NULL;
        out[n++] = c;
    }
    if (*p != '"')
        return NULL;
    out[n] = '\0';
    return p + 1;
}

/* Parses {"profiler": {"key": "value" | number, ...}} (other top-level keys are not expected). */
static int parse_config(const char *text, struct config *cfg)
{
    char key[MAX_VALUE];
    const char *p = skip_ws(text);
    if (*p++ != '{')
        return fail("acl.json is not a JSON object", NULL, 3);
    p = read_string(skip_ws(p), key, sizeof key);
    if (!p || strcmp(key, "profiler") != 0)
        return fail("acl.json has no \"profiler\" section", NULL, 3);
    p = skip_ws(p);
    if (*p++ != ':')
        return fail("bad JSON after \"profiler\"", NULL, 3);
    p = skip_ws(p);
    if (*p++ != '{')
        return fail("\"profiler\" is not an object", NULL, 3);
    p = skip_ws(p);
    while (*p != '}') {
        size_t k;
        p = read_string(p, key, sizeof key);
        if (!p)
            return fail("bad key in \"profiler\"", NULL, 3);
        for (k = 0; k < N_KEYS && strcmp(KEYS[k], key) != 0; k++)
            ;
        if (k == N_KEYS)
            return fail("invalid profiler key", key, 4);
        p = skip_ws(p);
        if (*p++ != ':')
            return fail("bad JSON after key", key, 3);
        p = skip_ws(p);
        if (*p == '"') {
            p = read_string(p, cfg->value[k], MAX_VALUE);
            if (!p)
                return fail("bad string value for", key, 3);
        } else {
            size_t n = 0;
            while ((*p >= '0' && *p <= '9') && n + 1 < MAX_VALUE)
                cfg->value[k][n++] = *p++;
            if (n == 0)
                return fail("value is neither a string nor an integer for", key, 4);
            cfg->value[k][n] = '\0';
        }
        cfg->present[k] = 1;
        p = skip_ws(p);
        if (*p == ',')
            p = skip_ws(p + 1);
        else if (*p != '}')
            return fail("bad JSON in \"profiler\"", NULL, 3);
    }
    return 0;
}

static const char *get(const struct config *cfg, const char *key, const char *fallback)
{
    for (size_t k = 0; k < N_KEYS; k++)
        if (strcmp(KEYS[k], key) == 0 && cfg->present[k])
            return cfg->value[k];
    return fallback;
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* out = a + "/" + b; 0 when it does not fit. */
static int join(char *out, size_t cap, const char *a, const char *b)
{
    int n = snprintf(out, cap, "%s/%s", a, b);
    return n > 0 && (size_t)n < cap;
}

static int copy_file(const char *from, const char *to)
{
    char buf[65536];
    size_t n;
    int ok = 1;
    FILE *in = fopen(from, "rb");
    FILE *out = in ? fopen(to, "wb") : NULL;
    if (!in || !out) {
        if (in)
            fclose(in);
        return 0;
    }
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
            ok = 0;
    if (ferror(in))
        ok = 0;
    fclose(in);
    if (fclose(out) != 0)
        ok = 0;
    return ok;
}

/* Copies the tree `from` into the new directory `to`, leaving out files whose names start with a
 * prefix in `skip` (NULL-terminated). */
static int copy_tree(const char *from, const char *to, const char *const *skip)
{
    char src[PATH_MAX], dst[PATH_MAX];
    struct dirent *e;
    DIR *d;
    int ok = 1;
    if (mkdir(to, 0750) != 0)
        return 0;
    d = opendir(from);
    if (!d)
        return 0;
    while (ok && (e = readdir(d)) != NULL) {
        const char *const *s;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        for (s = skip; *s && strncmp(e->d_name, *s, strlen(*s)) != 0; s++)
            ;
        if (*s)
            continue;
        if (!join(src, sizeof src, from, e->d_name) || !join(dst, sizeof dst, to, e->d_name))
            ok = 0;
        else
            ok = is_dir(src) ? copy_tree(src, dst, skip) : copy_file(src, dst);
    }
    closedir(d);
    return ok;
}

int main(void)
{
    static char text[MAX_TEXT];
    static struct config cfg;
    char exe[PATH_MAX], path[PATH_MAX], job[PATH_MAX], name[32], mode[64] = "";
    const char *skip[3] = {NULL, NULL, NULL};
    const char *output;
    ssize_t n;
    int rc, k = 0;

    n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return fail("cannot find my own folder", strerror(errno), 5);
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0';

    /* svp_acl_init(ACL_JSON_PATH) */
    if (read_file(ACL_JSON_PATH, text, sizeof text) < 0)
        return fail("cannot read " ACL_JSON_PATH, strerror(errno), 2);
    rc = parse_config(text, &cfg);
    if (rc != 0)
        return rc;
    printf("main: profiler switch=%s output=%s acl_api=%s aacpu=%s aac_metrics=%s interval=%s\n",
           get(&cfg, "switch", "off"), get(&cfg, "output", ""), get(&cfg, "acl_api", "on"),
           get(&cfg, "aacpu", "on"), get(&cfg, "aac_metrics", "ArithmeticUtilization"),
           get(&cfg, "interval", "0"));
    fflush(stdout);

    /* the "inference" */
    if (!join(path, sizeof path, exe, "mode"))
        return fail("path too long", exe, 5);
    if (read_file(path, mode, sizeof mode) > 0) {
        mode[strcspn(mode, "\r\n")] = '\0';
        if (strcmp(mode, "fail") == 0)
            return fail("svp_acl_mdl_execute failed", "error 100003", 1);
        if (strcmp(mode, "hang") == 0)
            for (;;)
                sleep(1);
    }

    /* svp_acl_finalize(): the profiling data */
    if (strcmp(get(&cfg, "switch", "off"), "on") != 0) {
        printf("main: done, profiling off\n");
        return 0;
    }
    output = get(&cfg, "output", exe);
    if (!is_dir(output) || access(output, W_OK) != 0) {
        printf("main: %s is not a writable folder, the data goes to %s\n", output, exe);
        output = exe;
    }
    if (strcmp(get(&cfg, "acl_api", "on"), "off") == 0)
        skip[k++] = "AclModule.";
    if (strcmp(get(&cfg, "aacpu", "on"), "off") == 0)
        skip[k++] = "DATA_PREPROCESS.";
    for (k = 1;; k++) {
        snprintf(name, sizeof name, "JOBBOARD%d", k);
        if (!join(job, sizeof job, output, name))
            return fail("path too long", output, 5);
        if (access(job, F_OK) != 0)
            break;
    }
    if (!join(path, sizeof path, exe, "payload"))
        return fail("path too long", exe, 5);
    if (!copy_tree(path, job, skip))
        return fail("cannot write the profiling data", strerror(errno), 6);
    if (!join(path, sizeof path, job, "board_acl.json"))
        return fail("path too long", job, 5);
    if (!copy_file(ACL_JSON_PATH, path))
        return fail("cannot copy acl.json", strerror(errno), 6);
    printf("main: done, profiling data in %s\n", job);
    return 0;
}
