/*
 * store.c - the SQLite model store (see store.h; schema in
 * docs/BLOB_FORMAT.md).
 *
 * A blob is kept as a row of `models` plus its bytes split into chunks of at
 * most 16 MiB in `model_chunks`: SQLite caps one value at SQLITE_MAX_LENGTH
 * (1e9 bytes by default) and a fitted nearest-neighbours model, which holds
 * its training data, can be larger.  Every write is one transaction begun
 * with BEGIN IMMEDIATE, which takes the write lock up front: a deferred
 * transaction that upgrades from read to write can get SQLITE_BUSY without
 * the busy handler ever waiting.
 */
#include "store.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <pwd.h>
#include <sqlite3.h>
#include <stdint.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

#define SCHEMA_VERSION 1
#define APPLICATION_ID 0x47534231 /* "GSB1": marks the file as a gsb store */
#define CHUNK_MAX (16 << 20)
#define WAL_SIZE_LIMIT (64 << 20) /* truncate the WAL back to this after checkpoints */

struct gsb__store {
    sqlite3 *db;
    char *path;           /* .../models.db, for messages */
    pthread_mutex_t lock; /* one operation (transaction) at a time per handle */
};

/* ---- names and directories -------------------------------------------- */

/* Length of the UTF-8 sequence at s (n bytes left) and its code point, or 0
 * when it is malformed, overlong, a surrogate or beyond U+10FFFF. */
static int utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
    int len;
    uint32_t min;
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    } else if ((s[0] & 0xe0) == 0xc0) {
        len = 2, min = 0x80, *cp = s[0] & 0x1f;
    } else if ((s[0] & 0xf0) == 0xe0) {
        len = 3, min = 0x800, *cp = s[0] & 0x0f;
    } else if ((s[0] & 0xf8) == 0xf0) {
        len = 4, min = 0x10000, *cp = s[0] & 0x07;
    } else {
        return 0;
    }
    if ((size_t)len > n)
        return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        *cp = *cp << 6 | (s[i] & 0x3f);
    }
    if (*cp < min || *cp > 0x10ffff || (*cp >= 0xd800 && *cp <= 0xdfff))
        return 0;
    return len;
}

/* 1..255 bytes of UTF-8 without control characters (C0, DEL, C1): names
 * appear in listings, logs and terminals, and must be valid JSON strings. */
static int check_name(const char *what, const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > GSB__STORE_NAME_MAX)
        return gsb__err(GSB_EINVAL, "%s must be 1 to %d bytes long, got %zu", what,
                        GSB__STORE_NAME_MAX, n);
    const unsigned char *s = (const unsigned char *)name;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = utf8_next(s + i, n - i, &cp);
        if (k == 0)
            return gsb__err(GSB_EINVAL, "%s is not valid UTF-8 (at byte %zu)", what, i);
        if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
            return gsb__err(GSB_EINVAL, "%s contains the control character U+%04X (at byte "
                            "%zu)", what, (unsigned)cp, i);
        i += (size_t)k;
    }
    return GSB_OK;
}

static char *join(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    char *s = malloc(na + nb + 1);
    if (s) {
        memcpy(s, a, na);
        memcpy(s + na, b, nb + 1);
    }
    return s;
}

int gsb__store_default_dir(char **out)
{
    *out = NULL;
    const char *d = getenv("GSB_DATA_DIR");
    if (d && *d)
        *out = strdup(d);
    else if ((d = getenv("XDG_DATA_HOME")) && d[0] == '/') /* XDG: relative paths are invalid */
        *out = join(d, "/gsb");
    else {
        d = getenv("HOME");
        struct passwd pw, *res = NULL;
        char buf[4096];
        if ((!d || !*d) && getpwuid_r(getuid(), &pw, buf, sizeof buf, &res) == 0 && res)
            d = res->pw_dir;
        if (!d || !*d)
            return gsb__err(GSB_EIO, "cannot choose a data directory for saved models: set "
                            "GSB_DATA_DIR or HOME");
        *out = join(d, "/.local/share/gsb");
    }
    return *out ? GSB_OK : gsb__err(GSB_ENOMEM, "out of memory");
}

/* mkdir -p with mode 0700 (saved models are the user's private data). */
static int mkdir_p(const char *dir)
{
    char *p = strdup(dir);
    if (!p)
        return gsb__err(GSB_ENOMEM, "out of memory");
    int rc = GSB_OK;
    struct stat sb;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, 0700) != 0 && !(stat(p, &sb) == 0 && S_ISDIR(sb.st_mode))) {
            char eb[128];
            /* GNU strerror_r (the build defines _GNU_SOURCE): thread-safe */
            rc = gsb__err(GSB_EIO, "cannot create data directory '%s': %s", p,
                          strerror_r(errno, eb, sizeof eb));
            break;
        }
        *s = c;
        if (!c)
            break;
    }
    free(p);
    return rc;
}

/* ---- SQLite helpers ---------------------------------------------------- */

/* The connection's last error as a gsb status (call before anything else
 * touches the connection, which would replace the message). */
static int db_err(gsb__store *st, const char *what)
{
    int code = sqlite3_errcode(st->db);
    return gsb__err(code == SQLITE_NOMEM ? GSB_ENOMEM : GSB_EIO, "%s: %s (database %s)", what,
                    sqlite3_errmsg(st->db), st->path);
}

static int exec(gsb__store *st, const char *what, const char *sql)
{
    return sqlite3_exec(st->db, sql, NULL, NULL, NULL) == SQLITE_OK ? GSB_OK
                                                                    : db_err(st, what);
}

/* Undo an open transaction, keeping the error message of the failure. */
static void rollback(gsb__store *st)
{
    /* some errors (I/O, disk full, out of memory) already rolled it back */
    if (!sqlite3_get_autocommit(st->db))
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
}

/* Prepare sql and bind ?1 to text t1 when it is not NULL. */
static int prep(gsb__store *st, const char *what, const char *sql, const char *t1,
                sqlite3_stmt **s)
{
    if (sqlite3_prepare_v2(st->db, sql, -1, s, NULL) != SQLITE_OK)
        return db_err(st, what); /* *s is NULL */
    if (t1 && sqlite3_bind_text(*s, 1, t1, -1, SQLITE_STATIC) != SQLITE_OK) {
        int rc = db_err(st, what);
        sqlite3_finalize(*s);
        *s = NULL;
        return rc;
    }
    return GSB_OK;
}

/* Step a statement that returns no rows to completion and finalize it. */
static int run(gsb__store *st, const char *what, sqlite3_stmt *s)
{
    int rc = sqlite3_step(s) == SQLITE_DONE ? GSB_OK : db_err(st, what);
    sqlite3_finalize(s);
    return rc;
}

static int run_sql(gsb__store *st, const char *what, const char *sql, const char *t1)
{
    sqlite3_stmt *s;
    GSB_TRY(prep(st, what, sql, t1, &s));
    return run(st, what, s);
}

/* The integer result of a PRAGMA query. */
static int pragma_int(gsb__store *st, const char *sql, int64_t *v)
{
    sqlite3_stmt *s;
    GSB_TRY(prep(st, "cannot open the model store", sql, NULL, &s));
    int rc = sqlite3_step(s) == SQLITE_ROW ? GSB_OK : db_err(st, "cannot open the model store");
    if (rc == GSB_OK)
        *v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return rc;
}

/* ---- open / schema ----------------------------------------------------- */

/* Schema version 1.  Later versions add steps to migrate() keyed on the
 * old user_version. */
static const char SCHEMA_V1[] =
    "CREATE TABLE models ("
    "  id INTEGER PRIMARY KEY,"
    "  name TEXT NOT NULL UNIQUE,"
    "  estimator TEXT NOT NULL,"
    "  size INTEGER NOT NULL,"
    "  saved_at TEXT NOT NULL);"
    "CREATE TABLE model_chunks ("
    "  model_id INTEGER NOT NULL,"
    "  seq INTEGER NOT NULL,"
    "  data BLOB NOT NULL,"
    "  PRIMARY KEY (model_id, seq));"
    "PRAGMA application_id = 1196638769;" /* APPLICATION_ID in decimal */
    "PRAGMA user_version = 1;";

_Static_assert(APPLICATION_ID == 1196638769, "SCHEMA_V1 spells APPLICATION_ID in decimal");

static int migrate(gsb__store *st)
{
    const char *what = "cannot create the model store's tables";
    int64_t ver, app;
    GSB_TRY(pragma_int(st, "PRAGMA user_version", &ver));
    GSB_TRY(pragma_int(st, "PRAGMA application_id", &app));
    if (app != 0 && app != APPLICATION_ID)
        return gsb__err(GSB_EIO, "%s is not a gsb model store (its application_id is 0x%08llx)",
                        st->path, (unsigned long long)app);
    if (ver > SCHEMA_VERSION)
        return gsb__err(GSB_EUNSUPPORTED, "model store %s has schema version %lld, newer than "
                        "this gsb supports (%d)", st->path, (long long)ver, SCHEMA_VERSION);
    if (ver == SCHEMA_VERSION)
        return GSB_OK;
    GSB_TRY(exec(st, what, "BEGIN IMMEDIATE"));
    /* re-read under the write lock: another process may have just done it */
    int rc = pragma_int(st, "PRAGMA user_version", &ver);
    if (rc == GSB_OK && ver == 0)
        rc = exec(st, what, SCHEMA_V1);
    if (rc == GSB_OK)
        rc = exec(st, what, "COMMIT");
    if (rc != GSB_OK)
        rollback(st);
    return rc;
}

static int configure(gsb__store *st)
{
    const char *what = "cannot open the model store";
    if (sqlite3_busy_timeout(st->db, GSB__STORE_BUSY_MS) != SQLITE_OK)
        return db_err(st, what);
    /* WAL: readers never block the writer and a commit is one append.  A file
     * system without WAL support (some network mounts) keeps the rollback
     * journal, which is as durable with synchronous=FULL, so that is accepted. */
    sqlite3_stmt *s;
    GSB_TRY(prep(st, what, "PRAGMA journal_mode = WAL", NULL, &s));
    /* switching a new database to WAL can answer SQLITE_BUSY at once, without
     * the busy handler, while another process does the same: retry */
    int step = sqlite3_step(s);
    for (int waited = 0; step == SQLITE_BUSY && waited < GSB__STORE_BUSY_MS; waited += 10) {
        sqlite3_reset(s);
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
        step = sqlite3_step(s);
    }
    int rc = step == SQLITE_ROW ? GSB_OK : db_err(st, what);
    sqlite3_finalize(s);
    GSB_TRY(rc);
    /* FULL: the WAL is synced at every commit, so a saved model survives a
     * power loss, not only a process crash; saves are rare enough to afford it */
    GSB_TRY(exec(st, what, "PRAGMA synchronous = FULL"));
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA journal_size_limit = %d", WAL_SIZE_LIMIT);
    GSB_TRY(exec(st, what, sql));
    return migrate(st);
}

int gsb__store_open(const char *dir, gsb__store **out)
{
    *out = NULL;
    char *dflt = NULL;
    if (!dir) {
        GSB_TRY(gsb__store_default_dir(&dflt));
        dir = dflt;
    }
    int rc = GSB_OK;
    gsb__store *st = NULL;
    if (!*dir)
        GSB_CHECK(gsb__err(GSB_EINVAL, "the data directory is an empty path"));
    GSB_CHECK(mkdir_p(dir));
    st = calloc(1, sizeof *st);
    if (!st || !(st->path = join(dir, "/" GSB__STORE_FILE))) {
        free(st);
        st = NULL;
        GSB_CHECK(gsb__err(GSB_ENOMEM, "out of memory"));
    }
    pthread_mutex_init(&st->lock, NULL);
    /* FULLMUTEX as well as our lock: sqlite's own structures stay safe even
     * if a call ever slipped past the lock */
    if (sqlite3_open_v2(st->path, &st->db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                        NULL) != SQLITE_OK) {
        rc = st->db ? db_err(st, "cannot open the model store")
                    : gsb__err(GSB_ENOMEM, "out of memory opening %s", st->path);
        goto done;
    }
    GSB_CHECK(configure(st));
    *out = st;
    st = NULL;
done:
    gsb__store_close(st);
    free(dflt);
    return rc;
}

void gsb__store_close(gsb__store *st)
{
    if (!st)
        return;
    sqlite3_close(st->db); /* every statement is finalized after use */
    pthread_mutex_destroy(&st->lock);
    free(st->path);
    free(st);
}

/* ---- operations -------------------------------------------------------- */

static int put_locked(gsb__store *st, const char *what, const char *name,
                      const char *estimator, const unsigned char *blob, size_t len)
{
    GSB_TRY(exec(st, what, "BEGIN IMMEDIATE"));
    sqlite3_stmt *s = NULL;
    int rc = run_sql(st, what, "DELETE FROM model_chunks WHERE model_id IN "
                     "(SELECT id FROM models WHERE name = ?1)", name);
    if (rc == GSB_OK)
        rc = run_sql(st, what, "DELETE FROM models WHERE name = ?1", name);
    if (rc == GSB_OK)
        rc = prep(st, what, "INSERT INTO models (name, estimator, size, saved_at) VALUES "
                  "(?1, ?2, ?3, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))", name, &s);
    if (rc == GSB_OK) {
        if (sqlite3_bind_text(s, 2, estimator, -1, SQLITE_STATIC) != SQLITE_OK ||
            sqlite3_bind_int64(s, 3, (sqlite3_int64)len) != SQLITE_OK)
            rc = db_err(st, what);
        rc = rc == GSB_OK ? run(st, what, s) : (sqlite3_finalize(s), rc);
        s = NULL;
    }
    sqlite3_int64 id = sqlite3_last_insert_rowid(st->db);
    if (rc == GSB_OK)
        rc = prep(st, what, "INSERT INTO model_chunks (model_id, seq, data) VALUES (?1, ?2, ?3)",
                  NULL, &s);
    /* SQLITE_LIMIT_LENGTH may be below the default in a custom sqlite build */
    size_t chunk = (size_t)sqlite3_limit(st->db, SQLITE_LIMIT_LENGTH, -1);
    if (chunk > CHUNK_MAX)
        chunk = CHUNK_MAX;
    for (size_t off = 0, seq = 0; rc == GSB_OK && off < len; off += chunk, seq++) {
        size_t n = len - off < chunk ? len - off : chunk;
        if (sqlite3_bind_int64(s, 1, id) != SQLITE_OK ||
            sqlite3_bind_int64(s, 2, (sqlite3_int64)seq) != SQLITE_OK ||
            sqlite3_bind_blob64(s, 3, blob + off, n, SQLITE_STATIC) != SQLITE_OK ||
            sqlite3_step(s) != SQLITE_DONE || sqlite3_reset(s) != SQLITE_OK)
            rc = db_err(st, what);
    }
    sqlite3_finalize(s);
    if (rc == GSB_OK)
        rc = exec(st, what, "COMMIT");
    if (rc != GSB_OK)
        rollback(st);
    return rc;
}

int gsb__store_put(gsb__store *st, const char *name, const char *estimator, const void *blob,
                   size_t len)
{
    GSB_TRY(check_name("model name", name));
    GSB_TRY(check_name("estimator name", estimator));
    if (!blob || len == 0)
        return gsb__err(GSB_EINVAL, "cannot save model '%s': the blob is empty", name);
    if (len > (size_t)INT64_MAX)
        return gsb__err(GSB_EINVAL, "cannot save model '%s': the blob is too large", name);
    char what[320];
    snprintf(what, sizeof what, "cannot save model '%s'", name);
    pthread_mutex_lock(&st->lock);
    int rc = put_locked(st, what, name, estimator, blob, len);
    pthread_mutex_unlock(&st->lock);
    return rc;
}

/* Concatenate the chunks of model id (size bytes) into a new buffer. */
static int read_chunks(gsb__store *st, const char *what, const char *name, sqlite3_int64 id,
                       sqlite3_int64 size, unsigned char **out)
{
    if (size <= 0 || (uint64_t)size > SIZE_MAX)
        return gsb__err(GSB_ECORRUPT, "saved model '%s' in %s has an invalid size %lld", name,
                        st->path, (long long)size);
    unsigned char *buf = malloc((size_t)size);
    if (!buf)
        return gsb__err(GSB_ENOMEM, "out of host memory loading model '%s' (%lld bytes)", name,
                        (long long)size);
    sqlite3_stmt *s;
    int rc = prep(st, what, "SELECT seq, data FROM model_chunks WHERE model_id = ?1 "
                  "ORDER BY seq", NULL, &s);
    if (rc == GSB_OK && sqlite3_bind_int64(s, 1, id) != SQLITE_OK)
        rc = db_err(st, what);
    size_t got = 0;
    sqlite3_int64 seq = 0;
    int step = SQLITE_DONE;
    while (rc == GSB_OK && (step = sqlite3_step(s)) == SQLITE_ROW) {
        const void *p = sqlite3_column_blob(s, 1);
        size_t n = (size_t)sqlite3_column_bytes(s, 1);
        if (n && !p)
            rc = db_err(st, what); /* out of memory converting the value */
        else if (sqlite3_column_int64(s, 0) != seq++ || n == 0 || n > (size_t)size - got)
            rc = gsb__err(GSB_ECORRUPT, "saved model '%s' in %s is damaged (bad chunk %lld)",
                          name, st->path, (long long)(seq - 1));
        else {
            memcpy(buf + got, p, n);
            got += n;
        }
    }
    if (rc == GSB_OK && step != SQLITE_DONE)
        rc = db_err(st, what);
    if (rc == GSB_OK && got != (size_t)size)
        rc = gsb__err(GSB_ECORRUPT, "saved model '%s' in %s is damaged: expected %lld bytes, "
                      "found %zu", name, st->path, (long long)size, got);
    sqlite3_finalize(s);
    if (rc == GSB_OK)
        *out = buf;
    else
        free(buf);
    return rc;
}

static int get_locked(gsb__store *st, const char *what, const char *name, void **blob,
                      size_t *len)
{
    /* one read transaction: the row and its chunks come from one snapshot */
    GSB_TRY(exec(st, what, "BEGIN"));
    sqlite3_stmt *s;
    sqlite3_int64 id = 0, size = 0;
    int rc = prep(st, what, "SELECT id, size FROM models WHERE name = ?1", name, &s);
    if (rc == GSB_OK) {
        int step = sqlite3_step(s);
        if (step == SQLITE_ROW) {
            id = sqlite3_column_int64(s, 0);
            size = sqlite3_column_int64(s, 1);
        } else {
            rc = step == SQLITE_DONE
                     ? gsb__err(GSB_ENOTFOUND, "no saved model named '%s'", name)
                     : db_err(st, what);
        }
        sqlite3_finalize(s);
    }
    unsigned char *buf = NULL;
    if (rc == GSB_OK)
        rc = read_chunks(st, what, name, id, size, &buf);
    if (rc == GSB_OK)
        rc = exec(st, what, "COMMIT");
    if (rc != GSB_OK) {
        rollback(st);
        free(buf);
        return rc;
    }
    *blob = buf;
    *len = (size_t)size;
    return GSB_OK;
}

int gsb__store_get(gsb__store *st, const char *name, void **blob, size_t *len)
{
    *blob = NULL;
    *len = 0;
    GSB_TRY(check_name("model name", name));
    char what[320];
    snprintf(what, sizeof what, "cannot load model '%s'", name);
    pthread_mutex_lock(&st->lock);
    int rc = get_locked(st, what, name, blob, len);
    pthread_mutex_unlock(&st->lock);
    return rc;
}

static int delete_locked(gsb__store *st, const char *what, const char *name)
{
    GSB_TRY(exec(st, what, "BEGIN IMMEDIATE"));
    int rc = run_sql(st, what, "DELETE FROM model_chunks WHERE model_id IN "
                     "(SELECT id FROM models WHERE name = ?1)", name);
    if (rc == GSB_OK)
        rc = run_sql(st, what, "DELETE FROM models WHERE name = ?1", name);
    if (rc == GSB_OK && sqlite3_changes(st->db) == 0)
        rc = gsb__err(GSB_ENOTFOUND, "no saved model named '%s'", name);
    if (rc == GSB_OK)
        rc = exec(st, what, "COMMIT");
    if (rc != GSB_OK)
        rollback(st);
    return rc;
}

int gsb__store_delete(gsb__store *st, const char *name)
{
    GSB_TRY(check_name("model name", name));
    char what[320];
    snprintf(what, sizeof what, "cannot delete model '%s'", name);
    pthread_mutex_lock(&st->lock);
    int rc = delete_locked(st, what, name);
    pthread_mutex_unlock(&st->lock);
    return rc;
}

/* One listing entry from the current row of s, or NULL (out of memory, or
 * text that is not UTF-8, which a gsb writer never stores). */
static json_t *list_entry(sqlite3_stmt *s)
{
    const char *name = (const char *)sqlite3_column_text(s, 0);
    const char *est = (const char *)sqlite3_column_text(s, 1);
    const char *at = (const char *)sqlite3_column_text(s, 3);
    if (!name || !est || !at)
        return NULL;
    json_t *e = json_object(), *jn = json_string(name), *je = json_string(est),
           *ja = json_string(at);
    int bad = !e || !jn || !je || !ja || json_object_set(e, "name", jn) ||
              json_object_set(e, "estimator", je) ||
              json_object_set_new(e, "size", json_integer(sqlite3_column_int64(s, 2))) ||
              json_object_set(e, "saved_at", ja);
    json_decref(jn);
    json_decref(je);
    json_decref(ja);
    if (bad) {
        json_decref(e);
        return NULL;
    }
    return e;
}

static int list_locked(gsb__store *st, const char *what, json_t *arr)
{
    sqlite3_stmt *s;
    /* BINARY collation: byte order, which is code point order for UTF-8 */
    GSB_TRY(prep(st, what, "SELECT name, estimator, size, saved_at FROM models ORDER BY name",
                 NULL, &s));
    int rc = GSB_OK, step;
    while ((step = sqlite3_step(s)) == SQLITE_ROW) {
        json_t *e = list_entry(s);
        if (!e || json_array_append_new(arr, e)) {
            rc = gsb__err(GSB_ECORRUPT, "%s: a saved model's name or metadata is not valid "
                          "text (database %s)", what, st->path);
            break;
        }
    }
    if (rc == GSB_OK && step != SQLITE_DONE)
        rc = db_err(st, what);
    sqlite3_finalize(s);
    return rc;
}

int gsb__store_list(gsb__store *st, char **json_out)
{
    *json_out = NULL;
    json_t *arr = json_array();
    if (!arr)
        return gsb__err(GSB_ENOMEM, "out of memory");
    pthread_mutex_lock(&st->lock);
    int rc = list_locked(st, "cannot list saved models", arr);
    pthread_mutex_unlock(&st->lock);
    if (rc == GSB_OK && !(*json_out = json_dumps(arr, JSON_COMPACT)))
        rc = gsb__err(GSB_ENOMEM, "out of memory listing saved models");
    json_decref(arr);
    return rc;
}
